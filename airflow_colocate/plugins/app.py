"""The admin HTTP API, a FastAPI app that the plugin mounts at ``/api/colocate`` in Airflow's API
server, and the route of the Colocation page.

Reads need an authenticated Airflow user, changes an admin (see :mod:`.auth`). Every change is one
catalog transaction whose event row names the Airflow user (``airflow:<name>``). The seeds' URLs
are kept: ``GET /api/colocate``, ``POST /api/colocate/group_stable|group_unstable?db_id=&group_id=``
and ``POST /api/colocate/bucketseq?db_id=&group_id=`` with the map as the body.
"""

from __future__ import annotations

import logging
import re
import threading
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
)
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_colocate import __version__
from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import make_engine
from airflow_colocate.catalog.views import BALANCE_KINDS, GroupView
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
from airflow_colocate.plugins.guard import RequestGuard
from airflow_colocate.plugins.index import colocate_meta
from airflow_colocate.plugins.page import render_page
from airflow_colocate.plugins.presenters import (
    backend_model,
    event_model,
    group_detail,
    group_model,
    job_model,
    table_detail,
    table_names,
)
from airflow_colocate.plugins.prometheus import CONTENT_TYPE
from airflow_colocate.plugins.prometheus import render as render_metrics
from airflow_colocate.plugins.schemas import (
    READ_ERRORS,
    WRITE_ERRORS,
    Backend,
    BucketMapBody,
    DbId,
    Event,
    Group,
    GroupDetail,
    GroupRef,
    GroupResponse,
    GrpId,
    IndexResponse,
    Job,
    JobKind,
    JobState,
    Limit,
    RelocateDelay,
    RetentionBody,
    SchemaChangeBody,
    TableDetail,
    TableRef,
    error_responses,
)

STATIC_DIR = Path(__file__).parent / "static"
log = logging.getLogger(__name__)
MAX_ECHO_CHARS = 64
"""A validation error shows the offending value only if it is a scalar; a string longer than this
is cut. A refused 12 MB bucket map must not come back as a 12 MB error."""
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S*", re.I)


class CatalogUnavailable(ColocateError):
    """The catalog could not be opened (unreachable, refused the login): 503, no URL shown."""


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
                except ColocateError:
                    engine.dispose()
                    raise
                except Exception as exc:  # the driver's message names host, port, user or file
                    engine.dispose()
                    log.error("colocation catalog unavailable: %s", exc)
                    raise CatalogUnavailable("colocation catalog unreachable") from exc
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


async def _metrics_catalog(request: Request) -> Catalog:
    """The scrape token (``[colocate] metrics_token``, which does not expire), else a reading user."""
    if auth.is_metrics_token(request.headers.get("authorization")):
        actor = auth.SCRAPER
    else:
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

        user = await get_user(request, None, await bearer_scheme(request))
        auth.check(user, auth.READ)
        actor = auth.actor(user)
    return await run_in_threadpool(request.app.state.catalogs.catalog, actor)


ReadCatalog = Annotated[Catalog, Depends(_reader_catalog)]
MetricsCatalog = Annotated[Catalog, Depends(_metrics_catalog)]
AdminCatalog = Annotated[Catalog, Depends(_admin_catalog)]


# ---------------------------------------------------------------------- what happens next (issue 30)


def _relocate_delay(minutes: float | None) -> timedelta:
    """The delay the balance uses: the query's override (what a maintenance run passed as
    ``relocate_delay_minutes``), else ``COLOCATE_RELOCATE_DELAY_MINUTES``, else 30 minutes."""
    from airflow_colocate.jobs.health import relocate_delay_from_env

    return relocate_delay_from_env() if minutes is None else timedelta(minutes=minutes)


def _with_outlook(catalog: Catalog, g: GroupView, base: dict, delay: timedelta, outlooks: dict | None = None) -> dict:
    """A group's answer with since when it is unstable, when relocation starts, whether joins shuffle."""
    found = (outlooks or {}).get(g.grp_id) or catalog.groups.outlook(g.group_id, relocate_delay=delay)
    return dict(base, **found.to_dict())


def _group_answer(catalog: Catalog, g: GroupView, delay: timedelta) -> dict:
    """``GroupDetail``: the presenters' detail, the outlook, and its tables' unavailable partitions."""
    lost = catalog.tables.availability().tables
    tables = [{"table": lost[t].table, "unavailable_count": lost[t].count,
               "unavailable_partitions": list(lost[t].partitions), "unavailable_backends": list(lost[t].backends)}
              for t in g.table_ids if t in lost]
    return dict(_with_outlook(catalog, g, group_detail(catalog, g), delay), unavailable_tables=tables)


def _table_answer(catalog: Catalog, ref: str) -> dict:
    """``TableDetail``: the presenters' detail and the partitions no read can serve now."""
    lost = catalog.tables.unavailable(ref)
    return dict(table_detail(catalog, ref), unavailable_count=lost.count, unavailable_partitions=list(lost.partitions),
                unavailable_backends=list(lost.backends))


# ---------------------------------------------------------------------- errors


def _status_of(exc: ColocateError) -> int:
    if isinstance(exc, NotFound):
        return status.HTTP_404_NOT_FOUND
    if isinstance(exc, (InvalidArgument, PlacementError, SchemaMismatch)):
        return status.HTTP_422_UNPROCESSABLE_CONTENT
    if isinstance(exc, (Conflict, AlreadyExists)):
        return status.HTTP_409_CONFLICT
    return status.HTTP_503_SERVICE_UNAVAILABLE  # e.g. the catalog was never initialised


def _without_input(error: dict) -> dict:
    """One validation error without the whole input: scalars kept (strings cut), containers
    dropped, so the answer stays small and does not echo a body back."""
    error = dict(error)
    value = error.pop("input", None)
    if isinstance(value, (bool, int, float)) or value is None:
        error["input"] = value
    elif isinstance(value, str):
        error["input"] = value if len(value) <= MAX_ECHO_CHARS else value[:MAX_ECHO_CHARS] + "..."
    return error


def _public_message(exc: ColocateError, code: int) -> str:
    """What a 503 may say: the reason and the fix, never the catalog's URL (it can name the
    database host, user or file); the API server's log has it."""
    if code != status.HTTP_503_SERVICE_UNAVAILABLE:
        return str(exc)
    log.error("colocation catalog unavailable: %s", exc)
    return URL.sub("<catalog>", str(exc)) + " (the API server's log names the catalog)"


# ---------------------------------------------------------------------- the app


def create_app(catalog_url: str | None = None) -> FastAPI:
    app = FastAPI(
        title="airflow-colocate admin API",
        version=__version__,
        description="Colocation groups: the index, groups, backends and balance jobs; mark a group stable or "
                    "unstable; force a bucket sequence. Authenticate as in Airflow's API (`POST /auth/token`, then "
                    "`Authorization: Bearer <token>`, or the UI's cookie); changes need an admin.",
        docs_url=None, redoc_url=None,  # their pages load scripts from a CDN: /docs is served by apidoc
    )
    app.state.catalogs = CatalogSource(catalog_url)
    app.add_middleware(RequestGuard)

    @app.exception_handler(ColocateError)
    async def colocate_error(request: Request, exc: ColocateError) -> JSONResponse:
        code = _status_of(exc)
        return JSONResponse(status_code=code, content={"detail": _public_message(exc, code)})

    async def refused(request: Request) -> JSONResponse | None:
        """401 or 403 for this request, or None when its user may make it."""
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

        try:
            user = await get_user(request, None, await bearer_scheme(request))
        except HTTPException as denied:
            return JSONResponse({"detail": denied.detail}, status_code=denied.status_code, headers=denied.headers)
        try:
            auth.check(user, auth.READ if request.method in ("GET", "HEAD") else auth.CHANGE)
        except HTTPException as denied:
            return JSONResponse({"detail": denied.detail}, status_code=denied.status_code)
        return None

    # FastAPI reads and parses a JSON body before it runs the auth dependencies. So that a refusal
    # never depends on the body, these two handlers authenticate and authorize first (401, 403).
    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await refused(request) or JSONResponse(
            {"detail": jsonable_encoder([_without_input(e) for e in exc.errors()])},
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

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
        return {"colocate_meta": colocate_meta(catalog.groups.list()), "status": "OK"}

    @app.get("/groups", response_model=list[Group], responses=READ_ERRORS,
             summary="Colocation groups, with since when each is unstable, when relocation starts and whether joins shuffle")
    def groups(catalog: ReadCatalog, relocate_delay_minutes: RelocateDelay = None) -> list[dict]:
        names, delay = table_names(catalog), _relocate_delay(relocate_delay_minutes)
        outlooks = catalog.groups.outlooks(relocate_delay=delay)
        return [_with_outlook(catalog, g, group_model(g, names), delay, outlooks) for g in catalog.groups.list()]

    @app.get("/groups/{group}", response_model=GroupDetail, responses=error_responses(401, 403, 404, 422, 503),
             summary="One group with its bucket map, why it is unstable, what happens next, and its unavailable partitions")
    def group(catalog: ReadCatalog, group: GroupRef, relocate_delay_minutes: RelocateDelay = None) -> dict:
        return _group_answer(catalog, catalog.groups.get(group), _relocate_delay(relocate_delay_minutes))

    @app.get("/backends", response_model=list[Backend], responses=READ_ERRORS,
             summary="Backends with their state (why, since when, last heartbeat, last probe), load and capacity")
    def backends(catalog: ReadCatalog) -> list[dict]:
        loads = catalog.backends.loads()
        return [backend_model(b, loads.get(b.id, {})) | b.state_fields() for b in catalog.backends.list()]

    @app.get("/jobs", response_model=list[Job], responses=READ_ERRORS,
             summary="Balance jobs (relocate, balance, repair) with their progress, newest first")
    def jobs(catalog: ReadCatalog,
             kind: Annotated[list[JobKind] | None, Query(description="default: the balance kinds")] = None,
             state: Annotated[list[JobState] | None, Query()] = None,
             limit: Limit = 100) -> list[dict]:
        return [job_model(j) for j in catalog.jobs.list(kinds=kind or BALANCE_KINDS, states=state, limit=limit)]

    @app.get("/flags", response_model=dict[str, bool], responses=READ_ERRORS, summary="Global switches")
    def flags(catalog: ReadCatalog) -> dict:
        return catalog.flags()

    @app.get("/events", response_model=list[Event], responses=READ_ERRORS, summary="The catalog's audit log, newest first")
    def events(catalog: ReadCatalog, limit: Limit = 100,
               kind: Annotated[str | None, Query(max_length=64)] = None) -> list[dict]:
        return [event_model(e) for e in catalog.events(limit=limit, kind=kind)]

    @app.get("/metrics", response_class=PlainTextResponse, responses=READ_ERRORS,
             summary="Groups, backends, balance jobs and replicas as Prometheus metrics (text format 0.0.4)",
             description="Scrape with the bearer token `[colocate] metrics_token` (it does not expire; "
                         "`authorization: {type: Bearer, credentials_file: <file>}` in Prometheus' scrape config), "
                         "or a reading user's token. The names are in docs/operations.md.")
    def metrics(catalog: MetricsCatalog) -> PlainTextResponse:
        return PlainTextResponse(render_metrics(catalog.health.metrics()), media_type=CONTENT_TYPE)

    @app.post("/group_stable", response_model=GroupResponse, responses=WRITE_ERRORS, summary="Mark a group stable")
    def group_stable(catalog: AdminCatalog, db_id: DbId, group_id: GrpId) -> dict:
        g = catalog.groups.set_stable(f"{db_id}.{group_id}", True)
        return {"status": "OK", "group": _group_answer(catalog, g, _relocate_delay(None))}

    @app.post("/group_unstable", response_model=GroupResponse, responses=WRITE_ERRORS,
              summary="Mark a group unstable (joins on it fall back until it is stable again)")
    def group_unstable(catalog: AdminCatalog, db_id: DbId, group_id: GrpId,
                       reason: Annotated[str | None, Query(max_length=1000)] = None) -> dict:
        user = catalog.actor
        g = catalog.groups.set_stable(f"{db_id}.{group_id}", False, reason=reason or f"marked unstable by {user}")
        return {"status": "OK", "group": _group_answer(catalog, g, _relocate_delay(None))}

    @app.post("/bucketseq", response_model=GroupResponse, responses=WRITE_ERRORS,
              summary="Force a group's bucket sequence",
              description="Validated: one entry per bucket, one backend per replica, every backend existing and "
                          "alive, no bucket on one backend (or host) twice. Refused (409) unless the flags "
                          "disable_colocate_balance and disable_colocate_relocate are set, or force=true.")
    def bucketseq(catalog: AdminCatalog, db_id: DbId, group_id: GrpId, bucket_map: Annotated[BucketMapBody, Body()],
                  force: Annotated[bool, Query(description="set the map although repair/balance may move it back")] = False) -> dict:
        g = catalog.groups.set_bucket_map(f"{db_id}.{group_id}", bucket_map, force=force)
        return {"status": "OK", "group": _group_answer(catalog, g, _relocate_delay(None))}

    @app.get("/tables/{table}", response_model=TableDetail, responses=error_responses(401, 403, 404, 422, 503),
             summary="A table: its schema versions, retention, dropped partitions and partitions no read can serve now")
    def table(catalog: ReadCatalog, table: TableRef) -> dict:
        return _table_answer(catalog, table)

    @app.post("/tables/{table}/schema", response_model=TableDetail, responses=WRITE_ERRORS,
              summary="Add, drop or widen columns: one new schema version, no file rewritten",
              description="Distribution and partition columns cannot change; a widening must be lossless; a "
                          "dropped column's name cannot be added again. Refused (422) with the rule otherwise.")
    def alter_schema(catalog: AdminCatalog, table: TableRef, change: Annotated[SchemaChangeBody, Body()]) -> dict:
        catalog.schemas.alter(table, add=[(c.name, c.type) for c in change.add], drop=list(change.drop),
                              widen=[(c.name, c.type) for c in change.widen])
        return _table_answer(catalog, table)

    @app.post("/tables/{table}/retention", response_model=TableDetail, responses=WRITE_ERRORS,
              summary="Set a table's retention (the maintenance DAG drops partitions dated older)")
    def set_retention(catalog: AdminCatalog, table: TableRef, body: Annotated[RetentionBody, Body()]) -> dict:
        catalog.schemas.set_retention(table, body.retention_days)
        return _table_answer(catalog, table)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        """The API reference, rendered here from the OpenAPI document (no CDN: works offline)."""
        from airflow_colocate.plugins.apidoc import render

        return HTMLResponse(render(app.openapi(), str(request.scope.get("root_path", ""))))

    @app.get("/guide", response_class=HTMLResponse, include_in_schema=False)
    def guide() -> HTMLResponse:
        """The README (the provider's Documentation link on Airflow's Providers page)."""
        from airflow_colocate.plugins.guide import render

        return HTMLResponse(render())

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    async def page(request: Request, group: Annotated[str | None, Query(max_length=200)] = None,
                   events_before: Annotated[int | None, Query(ge=1)] = None,
                   table: Annotated[str | None, Query(max_length=200)] = None,
                   backend: Annotated[str | None, Query(max_length=200)] = None,
                   job: Annotated[int | None, Query(ge=1)] = None) -> Any:
        """The Colocation page (an external view in Airflow's navigation). Without a session it
        sends the browser to Airflow's login, which comes back here."""
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

        try:
            user = await get_user(request, None, await bearer_scheme(request))
        except HTTPException as exc:
            if exc.status_code != status.HTTP_401_UNAUTHORIZED:
                raise
            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)),
                                    status_code=status.HTTP_303_SEE_OTHER)
        auth.check(user, auth.READ)
        source, actor = request.app.state.catalogs, auth.actor(user)
        html = await run_in_threadpool(lambda: render_page(source.catalog(actor), group,
                                                           base=str(request.scope.get("root_path", "")),
                                                           user=user.get_name(), events_before=events_before,
                                                           table=table, backend=backend, job=job))
        return HTMLResponse(html)

    return app
