"""The control-plane steps around every Spark job: plan in the catalog, then check and commit the
report. Operators run the job with spark-submit in between; the ``*_in_session`` helpers run it in
a Spark session you already have (notebooks, tests, benchmarks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import colocate_home
from airflow_colocate.catalog.views import WriteTicket
from airflow_colocate.join_planner import DISABLED, plan_reads
from airflow_colocate.planning import write_plan
from airflow_colocate.plans import JoinPlan, JoinReport, Source, WritePlan, WriteReport


def default_work_dir() -> Path:
    return colocate_home() / "runs"


def prepare_write(catalog: Catalog, table: str, partition: str, source: Source, *, mode: str = "overwrite",
                  work_dir: str | Path | None = None) -> tuple[WriteTicket, WritePlan]:
    """Allocate the new version and record the exact plan the Spark job gets."""
    ticket = catalog.begin_write(table, partition, mode=mode)
    try:
        plan = write_plan(ticket, source, str(work_dir or default_work_dir()))
        catalog.set_write_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                                  ticket.missing, {"staging_uri": plan.staging_uri})
    except BaseException as exc:
        catalog.abort_write(ticket.job_id, f"planning failed: {exc}")
        raise
    return ticket, plan


def finish_write(catalog: Catalog, ticket: WriteTicket, report: WriteReport) -> dict:
    """Commit the version and return the summary users see in XCom and the log."""
    partition = catalog.commit_write(ticket.job_id, report)
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
        "buckets": [{"bucket": r.bucket_seq, "backend": r.backend_id, "rows": r.rows, "bytes": r.bytes,
                     "checksum": r.checksum} for r in report.replicas],
    }


def write_in_session(spark, catalog: Catalog, table: str, partition: str, source: Source, *,
                     mode: str = "overwrite", work_dir: str | Path | None = None) -> dict:
    from airflow_colocate.spark.write_job import run_write

    ticket, plan = prepare_write(catalog, table, partition, source, mode=mode, work_dir=work_dir)
    try:
        report = run_write(spark, plan)
    except BaseException as exc:
        catalog.abort_write(ticket.job_id, f"{type(exc).__name__}: {exc}")
        raise
    return finish_write(catalog, ticket, report)


def prepare_join(catalog: Catalog, query: str, tables: Mapping[str, Sequence[str] | None], *,
                 require_colocate: bool = False, disable_colocate_join: bool = False,
                 output_table: str | None = None, output_partition: str = "all", output_mode: str = "overwrite",
                 output_path: str | None = None, work_dir: str | Path | None = None,
                 job_name: str = "join") -> tuple[JoinPlan, WriteTicket | None]:
    """Plan the reads (colocated or fallback, with reasons) and, for a catalog output, its write."""
    reads = {}
    for name, partitions in tables.items():
        alias = name.rpartition(".")[2]
        reads[alias] = catalog.read_replicas(name, partitions)
    group_ids = {view.group_id for view, _ in reads.values() if view.group_id}
    groups = {gid: catalog.group(gid) for gid in group_ids}
    available = {b.id for b in catalog.backends() if b.state == "alive"}
    disabled = disable_colocate_join or catalog.flags()["disable_colocate_join"]
    decided = plan_reads(reads, groups, available=available, disabled=disabled)
    work = str(work_dir or default_work_dir())
    ticket = None
    output = None
    if output_table is not None:
        ticket, output = prepare_write(catalog, output_table, output_partition,
                                       Source(query=query, tables=decided.tables), mode=output_mode, work_dir=work)
        job_id = f"join-{ticket.job_id}"
    else:
        job_id = f"{job_name}-{catalog.now().strftime('%Y%m%dT%H%M%S%f')}"
    plan = JoinPlan(job_id=job_id, query=query, tables=decided.tables, reasons=decided.reasons, groups=decided.groups,
                    require_colocate=require_colocate, report_uri=f"{work.rstrip('/')}/{job_id}/report.json",
                    output_path=output_path, output=output)
    return plan, ticket


def finish_join(catalog: Catalog, ticket: WriteTicket | None, report: JoinReport) -> dict:
    summary = {
        "job_id": report.job_id,
        "rows": report.rows,
        "colocate": bool(report.joins) and all(j.colocate for j in report.joins),
        "explain": report.explain,
        "joins": [{"join": j.join, "left": j.left_tables, "right": j.right_tables, "exchanges_left": j.exchanges_left,
                   "exchanges_right": j.exchanges_right, "colocate": j.colocate, "reason": j.reason,
                   "planned": j.planned} for j in report.joins],
        "seconds": round(report.seconds, 2),
        "preview": report.preview,
    }
    if ticket is not None:
        summary["output"] = finish_write(catalog, ticket, report.write)
    return summary


def join_in_session(spark, catalog: Catalog, query: str, tables: Mapping[str, Sequence[str] | None], **kwargs) -> dict:
    from airflow_colocate.spark.join_job import run_join

    plan, ticket = prepare_join(catalog, query, tables, **kwargs)
    try:
        report = run_join(spark, plan)
    except BaseException as exc:
        if ticket is not None:
            catalog.abort_write(ticket.job_id, f"{type(exc).__name__}: {exc}")
        raise
    return finish_join(catalog, ticket, report)


__all__ = ["DISABLED", "prepare_write", "finish_write", "write_in_session", "prepare_join", "finish_join", "join_in_session"]
