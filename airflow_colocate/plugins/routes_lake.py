"""The admin API's routes over the rest of the lake: backends, jobs, flags, the audit log, the
Prometheus metrics, and a table with its schema changes and retention."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query
from fastapi.responses import PlainTextResponse

from airflow_colocate.jobs.tables import TableChange, alter_table
from airflow_colocate.model.views import BALANCE_KINDS
from airflow_colocate.plugins.answers import table_answer
from airflow_colocate.plugins.deps import AdminCatalog, MetricsCatalog, ReadCatalog
from airflow_colocate.plugins.presenters import backend_model, event_model, job_model
from airflow_colocate.plugins.prometheus import CONTENT_TYPE
from airflow_colocate.plugins.prometheus import render as render_metrics
from airflow_colocate.plugins.schemas import (
    READ_ERRORS,
    WRITE_ERRORS,
    Backend,
    Event,
    EventBefore,
    Job,
    JobKind,
    JobState,
    Limit,
    RetentionBody,
    SchemaChangeBody,
    TableDetail,
    TableRef,
    error_responses,
)

router = APIRouter()


@router.get("/backends", response_model=list[Backend], responses=READ_ERRORS,
            summary="Backends with their state (why, since when, last heartbeat, last probe), load and capacity")
def backends(catalog: ReadCatalog) -> list[dict]:
    loads = catalog.backends.loads()
    return [backend_model(b, loads.get(b.id, {})) | b.state_fields() for b in catalog.backends.list()]


@router.get("/jobs", response_model=list[Job], responses=READ_ERRORS,
            summary="Balance jobs (relocate, balance, repair) with their progress, newest first")
def jobs(catalog: ReadCatalog,
         kind: Annotated[list[JobKind] | None, Query(description="default: the balance kinds")] = None,
         state: Annotated[list[JobState] | None, Query()] = None,
         limit: Limit = 100) -> list[dict]:
    return [job_model(j) for j in catalog.jobs.list(kinds=kind or BALANCE_KINDS, states=state, limit=limit)]


@router.get("/flags", response_model=dict[str, bool], responses=READ_ERRORS, summary="Global switches")
def flags(catalog: ReadCatalog) -> dict:
    return catalog.flags()


@router.get("/events", response_model=list[Event], responses=READ_ERRORS, summary="The catalog's audit log, newest first")
def events(catalog: ReadCatalog, limit: Limit = 100,
           kind: Annotated[str | None, Query(max_length=64)] = None, before: EventBefore = None) -> list[dict]:
    return [event_model(e) for e in catalog.events(limit=limit, kind=kind, before=before)]


@router.get("/metrics", response_class=PlainTextResponse, responses=READ_ERRORS,
            summary="Groups, backends, balance jobs and replicas as Prometheus metrics (text format 0.0.4)",
            description="Scrape with the bearer token `[colocate] metrics_token` (it does not expire; "
                        "`authorization: {type: Bearer, credentials_file: <file>}` in Prometheus' scrape config), "
                        "or a reading user's token. The names are in docs/operations.md.")
def metrics(catalog: MetricsCatalog) -> PlainTextResponse:
    return PlainTextResponse(render_metrics(catalog.metrics.read()), media_type=CONTENT_TYPE)


@router.get("/tables/{table}", response_model=TableDetail, responses=error_responses(401, 403, 404, 422, 503),
            summary="A table: its schema versions, retention, dropped partitions and partitions no read can serve now")
def table(catalog: ReadCatalog, table: TableRef) -> dict:
    return table_answer(catalog, table)


@router.post("/tables/{table}/schema", response_model=TableDetail, responses=WRITE_ERRORS,
             summary="Add, drop or widen columns: one new schema version, no file rewritten",
             description="Distribution and partition columns cannot change; a widening must be lossless; a "
                         "dropped column's name cannot be added again. Refused (422) with the rule otherwise.")
def alter_schema(catalog: AdminCatalog, table: TableRef, change: Annotated[SchemaChangeBody, Body()]) -> dict:
    alter_table(catalog, table, TableChange(add=[(c.name, c.type) for c in change.add], drop=list(change.drop),
                                            widen=[(c.name, c.type) for c in change.widen]))
    return table_answer(catalog, table)


@router.post("/tables/{table}/retention", response_model=TableDetail, responses=WRITE_ERRORS,
             summary="Set a table's retention (the maintenance DAG drops partitions dated older)")
def set_retention(catalog: AdminCatalog, table: TableRef, body: Annotated[RetentionBody, Body()]) -> dict:
    alter_table(catalog, table, TableChange(retention_days=body.retention_days or 0))
    return table_answer(catalog, table)


__all__ = ["router"]
