"""The admin HTTP API, a FastAPI app that the plugin mounts at ``/api/colocate`` in Airflow's API
server, and the Colocation page it serves.

Reads need an authenticated Airflow user, changes an admin (see :mod:`.auth`). Every change is one
catalog transaction whose event row names the Airflow user (``airflow:<name>``). The seeds' URLs
are kept: ``GET /api/colocate``, ``POST /api/colocate/group_stable|group_unstable?db_id=&group_id=``
and ``POST /api/colocate/bucketseq?db_id=&group_id=`` with the map as the body.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, BeforeValidator, Field
from sqlalchemy import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_colocate import __version__
from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import make_engine
from airflow_colocate.catalog.views import BackendView, GroupView
from airflow_colocate.core.errors import (
    AlreadyExists,
    ColocateError,
    Conflict,
    InvalidArgument,
    NotFound,
    PlacementError,
    SchemaMismatch,
)
from airflow_colocate.plugins import auth
from airflow_colocate.plugins.index import colocate_meta

BALANCE_KINDS = ("relocate", "balance", "repair")
JOB_KINDS = ("write", "relocate", "balance", "repair", "gc")
MAX_ID = 2**31 - 1
# dbId.grpId, dbId_name, or a name in the default database (ASCII only: it reaches SQL as an int).
GROUP_REF = r"^([0-9]{1,9}\.[0-9]{1,9}|[0-9]{1,9}_[A-Za-z_][A-Za-z0-9_]{0,63}|[A-Za-z_][A-Za-z0-9_]{0,63})$"
STATIC_DIR = Path(__file__).parent / "static"


# ---------------------------------------------------------------------- catalog per request


class CatalogSource:
    """One engine per app, opened on first use: the URL given, else the one the ``colocate_default``
    connection, ``COLOCATE_CATALOG_URL`` or the embedded default names (see the catalog hook)."""

    def __init__(self, url: str | None = None):
        self._url = url
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def catalog(self, actor: str) -> Catalog:
        with self._lock:
            if self._engine is None:
                url = self._url
                if url is None:
                    from airflow_colocate.hooks.catalog import ColocateCatalogHook

                    url = ColocateCatalogHook().catalog_url()
                engine = make_engine(url)
                try:
                    Catalog(url, engine=engine, actor=actor).check_schema()
                except Exception:
                    engine.dispose()
                    raise
                self._url, self._engine = url, engine
        return Catalog(self._url, engine=self._engine, actor=actor)

    def dispose(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None


def _reader_catalog(request: Request, user: auth.Reader) -> Catalog:
    return request.app.state.catalogs.catalog(auth.actor(user))


def _admin_catalog(request: Request, user: auth.Admin) -> Catalog:
    return request.app.state.catalogs.catalog(auth.actor(user))


ReadCatalog = Annotated[Catalog, Depends(_reader_catalog)]
AdminCatalog = Annotated[Catalog, Depends(_admin_catalog)]


# ---------------------------------------------------------------------- shapes


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


class GroupDetail(Group):
    bucket_map: list[list[int]] = Field(description="bucket seq -> backend ids, first = primary")
    reasons: list[str] = Field(description="why the group is unstable (empty when stable)")
    slots: dict[str, int] = Field(description="backend id -> bucket replicas of this group on it")


class GroupResponse(BaseModel):
    status: Literal["OK"] = "OK"
    group: GroupDetail


class Backend(BaseModel):
    id: int
    name: str
    root_uri: str
    host: str
    state: str
    state_since: datetime
    last_heartbeat: datetime | None
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
    progress: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class Event(BaseModel):
    id: int
    ts: datetime
    kind: str
    subject: str
    detail: dict[str, Any]
    actor: str


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` includes ``3.0``; strings and booleans stay refused (strict int)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


BackendId = Annotated[int, BeforeValidator(_integral), Field(strict=True, ge=0, le=MAX_ID)]
BucketRow = Annotated[list[BackendId], Field(min_length=1, max_length=16)]
BucketMapBody = Annotated[
    list[BucketRow],
    Field(min_length=1, max_length=65536, description="one list of backend ids per bucket seq, one id per replica",
          examples=[[[10004, 10002], [10003, 10002]]]),
]
DbId = Annotated[int, Query(ge=0, le=MAX_ID, description="database id (0 for a global group)")]
GrpId = Annotated[int, Query(ge=1, le=MAX_ID, description="group id")]
GroupRef = Annotated[str, PathParam(pattern=GROUP_REF, description="dbId.grpId, dbId_groupName, or a group name in database 'default'")]


def _tables(catalog: Catalog) -> dict[int, str]:
    return {t.id: t.qualified_name for t in catalog.tables()}


def group_model(g: GroupView, names: dict[int, str]) -> dict:
    return {"group_id": g.group_id, "db_id": g.db_id, "grp_id": g.grp_id, "name": g.name, "full_name": g.full_name,
            "table_ids": list(g.table_ids), "tables": [names.get(t, str(t)) for t in g.table_ids],
            "bucket_num": g.bucket_num, "replication_num": g.replication_num, "dist_col_types": list(g.dist_col_types),
            "stable": g.stable, "unstable_reason": g.unstable_reason, "version": g.version}


def group_reasons(catalog: Catalog, g: GroupView) -> list[str]:
    """The recorded reason, then the stability check's per-replica reasons when it recorded any."""
    if g.stable:
        return []
    out = [g.unstable_reason] if g.unstable_reason else []
    health = getattr(catalog, "group_health", None)
    if health is not None:
        try:
            out += [r.text for r in health(g.group_id).reasons if r.text not in out]
        except ColocateError:
            pass
    return out or ["marked unstable"]


def group_detail(catalog: Catalog, g: GroupView, names: dict[int, str] | None = None) -> dict:
    slots: dict[str, int] = {}
    for row in g.bucket_map:
        for be in row:
            slots[str(be)] = slots.get(str(be), 0) + 1
    return dict(group_model(g, names if names is not None else _tables(catalog)),
                bucket_map=[list(r) for r in g.bucket_map], reasons=group_reasons(catalog, g), slots=slots)


def backend_model(b: BackendView, load: dict[str, int]) -> dict:
    used = load.get("bytes", 0)
    return {"id": b.id, "name": b.name, "root_uri": b.root_uri, "host": b.host, "state": b.state,
            "state_since": b.state_since, "last_heartbeat": b.last_heartbeat, "capacity_bytes": b.capacity_bytes,
            "slots": load.get("slots", 0), "replicas": load.get("replicas", 0), "bytes": used,
            "used_fraction": (used / b.capacity_bytes) if b.capacity_bytes else None}


def job_model(j: dict) -> dict:
    plan, progress = j["plan"] or {}, j["progress"] or {}
    moves = plan.get("moves") or []
    planned = sum(int(mv.get("bytes") or 0) for mv in moves if isinstance(mv, dict))
    copied = int(progress.get("bytes") or 0) if isinstance(progress.get("bytes"), (int, float)) else 0
    step = progress.get("step")
    if step == "finished" or j["state"] == "done":
        done = 1.0
    elif planned:
        done = min(1.0, copied / planned)
    else:
        done = None
    return {"id": j["id"], "kind": j["kind"], "state": j["state"], "group_id": j["group_id"], "group": j["group"],
            "step": step if isinstance(step, str) else None, "moves": len(moves), "planned_bytes": planned,
            "copied_bytes": copied, "done_fraction": done, "progress": progress,
            "created_at": j["created_at"], "updated_at": j["updated_at"]}


def backends_with_load(catalog: Catalog) -> list[dict]:
    loads = catalog.backend_loads()
    return [backend_model(b, loads.get(b.id, {})) for b in catalog.backends()]


# ---------------------------------------------------------------------- errors


def _status_of(exc: ColocateError) -> int:
    if isinstance(exc, NotFound):
        return status.HTTP_404_NOT_FOUND
    if isinstance(exc, (InvalidArgument, PlacementError, SchemaMismatch)):
        return status.HTTP_422_UNPROCESSABLE_CONTENT
    if isinstance(exc, (Conflict, AlreadyExists)):
        return status.HTTP_409_CONFLICT
    return status.HTTP_503_SERVICE_UNAVAILABLE  # e.g. the catalog was never initialised


def _errors(*codes: int) -> dict:
    text = {401: "not authenticated (no or expired token)", 403: "authenticated, but not allowed",
            404: "no such group", 409: "refused in the current state (flags, running balance job)",
            422: "malformed or invalid request", 503: "catalog not reachable or not initialised"}
    return {c: {"model": Problem, "description": text[c]} for c in codes}


READ_ERRORS = _errors(401, 403, 422, 503)
WRITE_ERRORS = _errors(401, 403, 404, 409, 422, 503)


# ---------------------------------------------------------------------- the app


def create_app(catalog_url: str | None = None) -> FastAPI:
    app = FastAPI(
        title="airflow-colocate admin API",
        version=__version__,
        description="Colocation groups: the index, groups, backends and balance jobs; mark a group stable or "
                    "unstable; force a bucket sequence. Authenticate as in Airflow's API (`POST /auth/token`, then "
                    "`Authorization: Bearer <token>`, or the UI's cookie); changes need an admin.",
    )
    app.state.catalogs = CatalogSource(catalog_url)

    @app.exception_handler(ColocateError)
    async def colocate_error(request: Request, exc: ColocateError) -> JSONResponse:
        return JSONResponse(status_code=_status_of(exc), content={"detail": str(exc)})

    async def refused(request: Request) -> JSONResponse | None:
        """401 or 403 for this request, or None when its user may make it."""
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

        try:
            user = await get_user(request, None, await bearer_scheme(request))
        except HTTPException as denied:
            return JSONResponse({"detail": denied.detail}, status_code=denied.status_code, headers=denied.headers)
        method = auth.READ if request.method in ("GET", "HEAD") else auth.CHANGE
        if not auth.is_authorized(user, method):
            return JSONResponse({"detail": auth.forbidden(user, method)}, status_code=status.HTTP_403_FORBIDDEN)
        return None

    # FastAPI reads and parses a JSON body before it runs the auth dependencies. So that a refusal
    # never depends on the body, these two handlers authenticate and authorize first (401, 403).
    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await refused(request) or await request_validation_exception_handler(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Any:
        if exc.status_code == status.HTTP_400_BAD_REQUEST and exc.detail == "There was an error parsing the body":
            # Bytes that are not UTF-8 JSON: as malformed as invalid JSON, so 422 like it.
            return await refused(request) or JSONResponse(
                {"detail": [{"type": "json_invalid", "loc": ["body"], "input": None,
                             "msg": "the body is not JSON (UTF-8): send the bucket map as a JSON array of arrays"}]},
                status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
        return await http_exception_handler(request, exc)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="colocate_static")

    @app.get("/", response_model=IndexResponse, responses=READ_ERRORS, summary="The whole colocation index (seeds' shape)")
    def index(catalog: ReadCatalog) -> dict:
        return {"colocate_meta": colocate_meta(catalog.groups()), "status": "OK"}

    @app.get("/groups", response_model=list[Group], responses=READ_ERRORS, summary="Colocation groups")
    def groups(catalog: ReadCatalog) -> list[dict]:
        names = _tables(catalog)
        return [group_model(g, names) for g in catalog.groups()]

    @app.get("/groups/{group}", response_model=GroupDetail, responses=_errors(401, 403, 404, 422, 503),
             summary="One group with its bucket map and why it is unstable")
    def group(catalog: ReadCatalog, group: GroupRef) -> dict:
        return group_detail(catalog, catalog.group(group))

    @app.get("/backends", response_model=list[Backend], responses=READ_ERRORS, summary="Backends with load and capacity")
    def backends(catalog: ReadCatalog) -> list[dict]:
        return backends_with_load(catalog)

    @app.get("/jobs", response_model=list[Job], responses=READ_ERRORS,
             summary="Balance jobs (relocate, balance, repair) with their progress, newest first")
    def jobs(catalog: ReadCatalog,
             kind: Annotated[list[Literal[JOB_KINDS]] | None, Query(description="default: the balance kinds")] = None,  # type: ignore[valid-type]
             state: Annotated[list[Literal["running", "done", "cancelled", "failed", "committed", "pending"]] | None,
                              Query()] = None,
             limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict]:
        return [job_model(j) for j in catalog.list_jobs(kinds=kind or BALANCE_KINDS, states=state, limit=limit)]

    @app.get("/flags", response_model=dict[str, bool], responses=READ_ERRORS, summary="Global switches")
    def flags(catalog: ReadCatalog) -> dict:
        return catalog.flags()

    @app.get("/events", response_model=list[Event], responses=READ_ERRORS, summary="The catalog's audit log, newest first")
    def events(catalog: ReadCatalog, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
               kind: Annotated[str | None, Query(max_length=64)] = None) -> list[dict]:
        return [{"id": e.id, "ts": e.ts, "kind": e.kind, "subject": e.subject, "detail": e.detail, "actor": e.actor}
                for e in catalog.events(limit=limit, kind=kind)]

    @app.post("/group_stable", response_model=GroupResponse, responses=WRITE_ERRORS, summary="Mark a group stable")
    def group_stable(catalog: AdminCatalog, db_id: DbId, group_id: GrpId) -> dict:
        g = catalog.set_group_stable(f"{db_id}.{group_id}", True)
        return {"status": "OK", "group": group_detail(catalog, g)}

    @app.post("/group_unstable", response_model=GroupResponse, responses=WRITE_ERRORS,
              summary="Mark a group unstable (joins on it fall back until it is stable again)")
    def group_unstable(catalog: AdminCatalog, db_id: DbId, group_id: GrpId,
                       reason: Annotated[str | None, Query(max_length=1000)] = None) -> dict:
        user = catalog.actor
        g = catalog.set_group_stable(f"{db_id}.{group_id}", False, reason=reason or f"marked unstable by {user}")
        return {"status": "OK", "group": group_detail(catalog, g)}

    @app.post("/bucketseq", response_model=GroupResponse, responses=WRITE_ERRORS,
              summary="Force a group's bucket sequence",
              description="Validated: one entry per bucket, one backend per replica, every backend existing and "
                          "alive, no bucket on one backend (or host) twice. Refused (409) unless the flags "
                          "disable_colocate_balance and disable_colocate_relocate are set, or force=true.")
    def bucketseq(catalog: AdminCatalog, db_id: DbId, group_id: GrpId, bucket_map: Annotated[BucketMapBody, Body()],
                  force: Annotated[bool, Query(description="set the map although repair/balance may move it back")] = False) -> dict:
        g = catalog.set_bucket_map(f"{db_id}.{group_id}", bucket_map, force=force)
        return {"status": "OK", "group": group_detail(catalog, g)}

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    async def page(request: Request, group: Annotated[str | None, Query(max_length=200)] = None) -> Any:
        """The Colocation page (an external view in Airflow's navigation). Without a session it
        sends the browser to Airflow's login, which comes back here."""
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

        from airflow_colocate.plugins.page import render_page

        try:
            user = await get_user(request, None, await bearer_scheme(request))
        except HTTPException as exc:
            if exc.status_code != status.HTTP_401_UNAUTHORIZED:
                raise
            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)),
                                    status_code=status.HTTP_303_SEE_OTHER)
        if not auth.is_authorized(user, auth.READ):
            raise HTTPException(status.HTTP_403_FORBIDDEN, auth.forbidden(user, auth.READ))
        source, actor = request.app.state.catalogs, auth.actor(user)
        html = await run_in_threadpool(lambda: render_page(source.catalog(actor), group,
                                                           base=str(request.scope.get("root_path", "")),
                                                           user=user.get_name()))
        return HTMLResponse(html)

    return app
