"""The control-plane steps around a write: plan in the catalog, then check and commit the report.
Operators run the Spark job with spark-submit in between; :func:`write_in_session` runs it in a
Spark session you already have (notebooks, tests, benchmarks)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from airflow_colocate.catalog import Catalog
from airflow_colocate.model.views import WriteTicket
from airflow_colocate.core.contract import Source, WritePlan, WriteReport
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.paths import default_work_dir
from airflow_colocate.planner.write import write_plan


SCHEMA_EVOLUTIONS = (None, "add_columns")


def check_schema_evolution(value: str | None) -> str | None:
    if value == "":
        value = None
    if value not in SCHEMA_EVOLUTIONS:
        raise InvalidArgument(f"invalid schema_evolution {value!r}: expected None (a source column the table lacks "
                              f"is refused) or 'add_columns' (it is added to the table)")
    return value


def prepare_write(catalog: Catalog, table: str, partition: str, source: Source, *, mode: str = "overwrite",
                  work_dir: str | Path | None = None, schema_evolution: str | None = None) -> tuple[WriteTicket, WritePlan]:
    """Allocate the new version and record the exact plan the Spark job gets."""
    evolution = check_schema_evolution(schema_evolution)
    ticket = catalog.writes.begin(table, partition, mode=mode)
    try:
        plan = write_plan(ticket, source, str(work_dir or default_work_dir()))
        if evolution == "add_columns":
            plan = replace(plan, add_columns=True)
        catalog.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                                  ticket.missing, {"staging_uri": plan.staging_uri})
    except BaseException as exc:
        catalog.writes.abort(ticket.job_id, f"planning failed: {exc}")
        raise
    return ticket, plan


def finish_write(catalog: Catalog, ticket: WriteTicket, report: WriteReport) -> dict:
    """Commit the version and return the summary users see in XCom and the log. Columns the job
    added (schema_evolution) become a new schema version first: a refused one aborts the write."""
    have = {(n.lower(), t) for n, t in catalog.tables.get(ticket.table.id).columns} if report.added_columns else set()
    new = [tuple(c) for c in report.added_columns if (c[0].lower(), c[1]) not in have]  # a parallel write added it
    if new:
        try:
            catalog.schemas.alter(ticket.table.id, add=new)
        except Exception as exc:
            catalog.writes.abort(ticket.job_id, f"adding the source's new columns failed: {exc}")
            raise
    partition = catalog.writes.commit(ticket.job_id, report)
    return {
        "table": ticket.table.qualified_name,
        "group": ticket.table.group_id,
        "partition": ticket.partition_value,
        "version": partition.visible_version,
        "mode": ticket.mode,
        "job_id": ticket.job_id,
        "rows": report.source_rows,
        "bytes": sum(r.bytes for r in report.replicas),
        "replicas": len(report.replicas),
        "seconds": round(report.seconds, 2),
        "missing_replicas": list(ticket.missing),
        "added_columns": [list(c) for c in report.added_columns],
        "buckets": [{"bucket": r.bucket_seq, "backend": r.backend_id, "rows": r.rows, "bytes": r.bytes,
                     "checksum": r.checksum} for r in report.replicas],
    }


def write_in_session(spark, catalog: Catalog, table: str, partition: str, source: Source, *,
                     mode: str = "overwrite", work_dir: str | Path | None = None,
                     timings: dict | None = None, schema_evolution: str | None = None) -> dict:
    """Plan, run the write job in ``spark`` and commit; ``timings`` (when given) receives the seconds
    of the catalog steps and of each phase of the job."""
    from airflow_colocate.spark.write_job import timed, run_write

    with timed(timings, "catalog: plan"):
        ticket, plan = prepare_write(catalog, table, partition, source, mode=mode, work_dir=work_dir,
                                     schema_evolution=schema_evolution)
    try:
        report = run_write(spark, plan, timings)
    except BaseException as exc:
        catalog.writes.abort(ticket.job_id, f"{type(exc).__name__}: {exc}")
        raise
    with timed(timings, "catalog: commit"):
        return finish_write(catalog, ticket, report)


__all__ = ["prepare_write", "finish_write", "write_in_session"]
