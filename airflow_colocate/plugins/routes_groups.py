"""The admin API's group routes: the seeds' index, groups with what happens next, one group, and
the seeds' changes (mark stable or unstable, force a bucket sequence)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query

from airflow_colocate.core import validate

from airflow_colocate.plugins.answers import group_answer, relocate_delay, with_outlook
from airflow_colocate.plugins.deps import AdminCatalog, ReadCatalog
from airflow_colocate.plugins.index import colocate_meta
from airflow_colocate.plugins.presenters import group_model, table_names
from airflow_colocate.plugins.schemas import (
    READ_ERRORS,
    WRITE_ERRORS,
    BucketMapBody,
    DbId,
    Group,
    GroupDetail,
    GroupRef,
    GroupResponse,
    GrpId,
    IndexResponse,
    RelocateDelay,
    error_responses,
)

router = APIRouter()


@router.get("/", response_model=IndexResponse, responses=READ_ERRORS, summary="The whole colocation index (seeds' shape)")
def index(catalog: ReadCatalog) -> dict:
    return {"colocate_meta": colocate_meta(catalog.groups.list()), "status": "OK"}


@router.get("/groups", response_model=list[Group], responses=READ_ERRORS,
            summary="Colocation groups, with since when each is unstable, when relocation starts and whether joins shuffle")
def groups(catalog: ReadCatalog, relocate_delay_minutes: RelocateDelay = None) -> list[dict]:
    names, delay = table_names(catalog), relocate_delay(relocate_delay_minutes)
    outlooks = catalog.groups.outlooks(relocate_delay=delay)
    return [with_outlook(catalog, g, group_model(g, names), delay, outlooks) for g in catalog.groups.list()]


@router.get("/groups/{group}", response_model=GroupDetail, responses=error_responses(401, 403, 404, 422, 503),
            summary="One group with its bucket map, why it is unstable, what happens next, and its unavailable partitions")
def group(catalog: ReadCatalog, group: GroupRef, relocate_delay_minutes: RelocateDelay = None) -> dict:
    return group_answer(catalog, catalog.groups.get(group), relocate_delay(relocate_delay_minutes))


@router.post("/group_stable", response_model=GroupResponse, responses=WRITE_ERRORS, summary="Mark a group stable")
def group_stable(catalog: AdminCatalog, db_id: DbId, group_id: GrpId) -> dict:
    g = catalog.groups.set_stable(f"{db_id}.{group_id}", True)
    return {"status": "OK", "group": group_answer(catalog, g, relocate_delay(None))}


@router.post("/group_unstable", response_model=GroupResponse, responses=WRITE_ERRORS,
             summary="Mark a group unstable (joins on it fall back until it is stable again)")
def group_unstable(catalog: AdminCatalog, db_id: DbId, group_id: GrpId,
                   reason: Annotated[str | None, Query(max_length=validate.MAX_REASON, pattern=validate.ONE_LINE)] = None,
                   ) -> dict:
    user = catalog.actor
    g = catalog.groups.set_stable(f"{db_id}.{group_id}", False, reason=reason or f"marked unstable by {user}")
    return {"status": "OK", "group": group_answer(catalog, g, relocate_delay(None))}


@router.post("/group_join_policy", response_model=GroupResponse, responses=WRITE_ERRORS,
             summary="Set when a group's joins stay bucketed",
             description="'stable' (the default, the seeds' rule): only while the group is stable. 'readable': also "
                         "while it is unstable, as long as every bucket has a verified replica on an alive backend.")
def group_join_policy(catalog: AdminCatalog, db_id: DbId, group_id: GrpId,
                      policy: Annotated[Literal["stable", "readable"], Query(description="stable or readable")]) -> dict:
    g = catalog.groups.set_join_policy(f"{db_id}.{group_id}", policy)
    return {"status": "OK", "group": group_answer(catalog, g, relocate_delay(None))}


@router.post("/group_split", response_model=GroupResponse, responses=WRITE_ERRORS,
             summary="Split a group's bucket layout",
             description="New versions of its tables are written at factor times its current layout; committed ones "
                         "keep theirs. Refused (422) for a factor below 2 or one that exceeds the maximum bucket count, "
                         "(409) while a balance job changes the group.")
def group_split(catalog: AdminCatalog, db_id: DbId, group_id: GrpId,
                factor: Annotated[int, Query(ge=0, le=2**31 - 1, description="the multiple, at least 2 (the catalog says why another is refused)")]) -> dict:
    g = catalog.groups.split(f"{db_id}.{group_id}", factor)
    return {"status": "OK", "group": group_answer(catalog, g, relocate_delay(None))}


@router.post("/bucketseq", response_model=GroupResponse, responses=WRITE_ERRORS,
             summary="Force a group's bucket sequence",
             description="Validated: one entry per bucket, one backend per replica, every backend existing and "
                         "alive, no bucket on one backend (or host) twice. Refused (409) unless the flags "
                         "disable_colocate_balance and disable_colocate_relocate are set, or force=true.")
def bucketseq(catalog: AdminCatalog, db_id: DbId, group_id: GrpId, bucket_map: Annotated[BucketMapBody, Body()],
              force: Annotated[bool, Query(description="set the map although repair/balance may move it back")] = False) -> dict:
    g = catalog.groups.set_bucket_map(f"{db_id}.{group_id}", bucket_map, force=force)
    return {"status": "OK", "group": group_answer(catalog, g, relocate_delay(None))}


__all__ = ["router"]
