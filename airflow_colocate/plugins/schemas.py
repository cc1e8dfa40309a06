"""What the admin API accepts and answers: the request parameters with their bounds, the response
models, and the documented error responses. FastAPI builds both the validation and the OpenAPI
document from these, so a bound is written once, here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Query
from fastapi import Path as PathParam
from pydantic import BaseModel, BeforeValidator, Field

from airflow_colocate.model.views import BALANCE_KINDS

JOB_KINDS = ("write", *BALANCE_KINDS, "gc")
JOB_STATES = ("running", "done", "cancelled", "failed", "committed", "pending")
MAX_ID = 2**31 - 1
# dbId.grpId, dbId_name, or a name in the default database (ASCII only: it reaches SQL as an int).
GROUP_REF = r"^([0-9]{1,9}\.[0-9]{1,9}|[0-9]{1,9}_[A-Za-z_][A-Za-z0-9_]{0,63}|[A-Za-z_][A-Za-z0-9_]{0,63})$"


# ---------------------------------------------------------------------- responses


class Problem(BaseModel):
    detail: str | list[Any] = Field(description="what was wrong and what would be right")


class GroupIdModel(BaseModel):
    dbId: int
    grpId: int


class ColumnTypeModel(BaseModel):
    type: str
    len: int
    isAssignedStrLenInColDefinition: bool
    precision: int
    scale: int


class GroupSchemaModel(BaseModel):
    groupId: GroupIdModel
    distributionColTypes: list[ColumnTypeModel]
    bucketsNum: int
    replicationNum: int


class ColocateMeta(BaseModel):
    groupName2Id: dict[str, GroupIdModel]
    group2Tables: dict[str, list[int]]
    table2Group: dict[str, GroupIdModel]
    group2Schema: dict[str, GroupSchemaModel]
    group2BackendsPerBucketSeq: dict[str, list[list[int]]]
    unstableGroups: list[GroupIdModel]


class IndexResponse(BaseModel):
    colocate_meta: ColocateMeta
    status: Literal["OK"] = "OK"


class Group(BaseModel):
    group_id: str = Field(description="dbId.grpId")
    db_id: int
    grp_id: int
    name: str
    full_name: str = Field(description="dbId_groupName (a global group: its name)")
    table_ids: list[int]
    tables: list[str]
    bucket_num: int
    replication_num: int
    dist_col_types: list[str]
    stable: bool
    unstable_reason: str | None
    version: int
    unstable_since: datetime | None = Field(description="when the group last turned unstable; null while stable "
                                                        "(or unstable since before catalog 0007)")
    relocation_starts_at: datetime | None = Field(
        description="when balance starts relocating the buckets of the down backends its map names: the earliest "
                    "down-since + relocate delay; null when none is down, or when relocation is already due")
    relocation_due: bool = Field(description="a backend its map names is unavailable now (down longer than the delay, "
                                             "decommissioning) or a relocate job runs: the next balance/repair moves it")
    relocation_backends: list[str] = Field(description="the backends its map names that are not alive")
    relocation_disabled: bool = Field(description="disable_colocate_relocate is set: no run relocates its buckets")
    relocate_delay_seconds: float = Field(description="the delay these times use (the query's relocate_delay_minutes, "
                                                      "else COLOCATE_RELOCATE_DELAY_MINUTES, else 30 min)")
    joins_shuffle: bool = Field(description="joins on its tables fall back to a shuffle join now: colocate join is "
                                            "disabled, the group is unstable, or its map names a backend not alive")
    joins_shuffle_reason: str | None = Field(description="the join planner's reason; null when joins are colocated")
    layout_buckets: int = Field(0, description="the bucket count new versions are written with: bucket_num, or a "
                                               "multiple of it after 'group split' (bucket j lives in map entry j mod "
                                               "bucket_num; joins still run at bucket_num with no shuffle)")
    join_policy: str = Field("stable", description="when its joins stay bucketed: 'stable' (only while the group is "
                                                   "stable, the seeds' rule) or 'readable' (while every bucket has a "
                                                   "verified replica on an alive backend)")
    remote_buckets: int = Field(0, description="under 'readable', while unstable: buckets none of whose map's "
                                               "backends is alive (their reads are remote)")


class UnavailableTable(BaseModel):
    table: str = Field(description="db.table")
    unavailable_count: int
    unavailable_partitions: list[str] = Field(description="the first 100 by value")
    unavailable_backends: list[str] = Field(description="the backends, not alive, holding their last verified copies")


class GroupDetail(Group):
    bucket_map: list[list[int]] = Field(description="bucket seq -> backend ids, first = primary")
    reasons: list[str] = Field(description="why the group is unstable (empty when stable)")
    slots: dict[str, int] = Field(description="backend id -> bucket replicas of this group on it")
    layouts: dict[str, int] = Field(default_factory=dict, description="bucket count -> committed partitions of its "
                                    "tables written at it (a split group has its old and its new count)")
    unavailable_tables: list[UnavailableTable] = Field(
        description="its tables with partitions no read can serve now (a bucket's verified replicas all on backends "
                    "that are not alive); empty when every partition is readable")


class GroupResponse(BaseModel):
    status: Literal["OK"] = "OK"
    group: GroupDetail


class Backend(BaseModel):
    id: int
    name: str
    root_uri: str
    host: str
    state: str = Field(description="alive, down, decommissioning or decommissioned")
    state_reason: str | None = Field(description="why it is in this state, as given (e.g. 'disk pulled', or the "
                                                 "probe's error); null when no reason was given")
    reason_source: str | None = Field(description="who set the state: 'admin' (mark-down / mark-up; the event "
                                                  "log names the user), 'probe', or null")
    state_since: datetime = Field(description="when it entered this state")
    last_heartbeat: datetime | None = Field(description="the last probe that reached it (null: never)")
    last_probe_at: datetime | None = Field(description="when the last probe ran, whatever it found (null: never)")
    last_probe_ok: bool | None = Field(description="whether the last probe reached it: a backend an admin "
                                                   "marked down can be reachable and stay down")
    last_probe_detail: str | None = Field(description="'heartbeat ok', or why the last probe failed")
    capacity_bytes: int | None
    slots: int = Field(description="bucket replicas that the groups' maps place here")
    replicas: int = Field(description="verified replicas of visible versions held here")
    bytes: int = Field(description="their size")
    used_fraction: float | None = Field(description="bytes / capacity_bytes (null when the capacity is unknown)")


class Job(BaseModel):
    id: int
    kind: str
    state: str
    group_id: str | None
    group: str | None
    step: str | None
    moves: int
    planned_bytes: int
    copied_bytes: int
    done_fraction: float | None
    eta_seconds: float | None = None  # a balance job's time left at its copy rate so far
    progress: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class Event(BaseModel):
    event_id: int = Field(description="EventId in `colocate events --json`; `before=` pages back from it")
    ts: datetime
    kind: str
    subject: str
    detail: dict[str, Any]
    actor: str


def error_responses(*codes: int) -> dict:
    """The refusals a route documents, each with the :class:`Problem` body it answers."""
    text = {401: "not authenticated (no or expired token)", 403: "authenticated, but not allowed",
            404: "no such group", 409: "refused in the current state (flags, running balance job)",
            422: "malformed or invalid request", 503: "catalog not reachable or not initialised"}
    return {c: {"model": Problem, "description": text[c]} for c in codes}


READ_ERRORS = error_responses(401, 403, 422, 503)
WRITE_ERRORS = error_responses(401, 403, 404, 409, 422, 503)


class SchemaVersion(BaseModel):
    version: int
    columns: list[list[str]] = Field(description="[name, type] pairs of this version")
    change: list[dict[str, str]] = Field(description="what made it: {op: add|drop|widen, column, type, old}; empty for the first")
    created_at: str


class TableDetail(BaseModel):
    id: int
    table: str = Field(description="db.table")
    group: str | None = Field(description="its colocation group's name (null: none)")
    columns: list[list[str]] = Field(description="the current schema, [name, type] pairs")
    dist_cols: list[str]
    partition_cols: list[str]
    schema_version: int
    retention_days: int | None = Field(description="partitions dated older are dropped by the maintenance DAG (null: kept)")
    versions: list[SchemaVersion]
    dropped_partitions: list[str] = Field(description="partition values in the recycle bin")
    unavailable_count: int = Field(description="committed partitions no read can serve now: one of their buckets has "
                                               "verified replicas only on backends that are not alive")
    unavailable_partitions: list[str] = Field(description="the first 100 of them by value")
    unavailable_backends: list[str] = Field(description="the backends, not alive, holding their last verified copies")


# ---------------------------------------------------------------------- requests


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` includes ``3.0``; strings and booleans stay refused (strict int)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# The bounds come before the BeforeValidator: after it, pydantic writes them into the OpenAPI
# document as "ge"/"le", which JSON Schema does not know (clients and fuzzers ignore them).
BackendId = Annotated[int, Field(strict=True, ge=0, le=MAX_ID), BeforeValidator(_integral)]
MAX_REPLICAS = 16
MAX_MAP_BUCKETS = 65536
BucketRow = Annotated[list[BackendId], Field(min_length=1, max_length=MAX_REPLICAS)]
BucketMapBody = Annotated[
    list[BucketRow],
    Field(min_length=1, max_length=MAX_MAP_BUCKETS, description="one list of backend ids per bucket seq, one id per replica",
          examples=[[[10004, 10002], [10003, 10002]]]),
]
MAX_BODY_BYTES = MAX_MAP_BUCKETS * (MAX_REPLICAS * len("2147483647, ") + len("[], ")) + len("[]")
"""The largest request body the API reads (~12.3 MB): the largest bucket map the schema allows,
as compact JSON. Larger bodies are refused with 413 before authentication or parsing
(:mod:`.guard`), so an anonymous client cannot make the API server read and parse megabytes."""
ColumnName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ColumnType = Annotated[str, Field(min_length=1, max_length=64, examples=["bigint", "decimal(18,2)"])]


class ColumnDef(BaseModel):
    name: ColumnName
    type: ColumnType


class SchemaChangeBody(BaseModel):
    """One schema version: every change applied, or none (the refusal names the rule)."""

    add: list[ColumnDef] = Field(default=[], max_length=100, description="columns to add; older partitions read them as null")
    drop: list[ColumnName] = Field(default=[], max_length=100, description="columns to drop (a name dropped is never taken again)")
    widen: list[ColumnDef] = Field(default=[], max_length=100,
                                   description="lossless widenings: int->bigint, float->double, decimal precision up, date->timestamp_ntz")


class RetentionBody(BaseModel):
    retention_days: int | None = Field(ge=1, le=36500, description="days to keep partitions by their date value; null keeps all")


TableRef = Annotated[str, PathParam(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63})?$",
                                    description="table or db.table")]
DbId = Annotated[int, Query(ge=0, le=MAX_ID, description="database id (0 for a global group)")]
GrpId = Annotated[int, Query(ge=1, le=MAX_ID, description="group id")]
GroupRef = Annotated[str, PathParam(pattern=GROUP_REF, description="dbId.grpId, dbId_groupName, or a group name in database 'default'")]
JobKind = Literal[JOB_KINDS]  # type: ignore[valid-type]
JobState = Literal[JOB_STATES]  # type: ignore[valid-type]
Limit = Annotated[int, Query(ge=1, le=1000)]
EventBefore = Annotated[int | None, Query(ge=1, le=MAX_ID, description="only events older than this event_id: the "
                                          "last event_id of a page gives the next page")]
RelocateDelay = Annotated[float | None, Query(ge=0, le=525600, description="relocate delay in minutes for "
                                              "relocation_starts_at (default: COLOCATE_RELOCATE_DELAY_MINUTES, else 30)")]
