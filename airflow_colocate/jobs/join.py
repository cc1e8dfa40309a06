"""The control-plane steps around a join: decide which tables are read colocated (with reasons),
plan the output's write, then check and commit the report, and record the replicas the job found
bad (a missing, short or unknown file) so no read chooses them again and balance repairs them.
:func:`join_in_session` runs the Spark job in a session you already have."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from airflow_colocate.catalog import Catalog
from airflow_colocate.model.views import WriteTicket
from airflow_colocate.core.contract import BadReplica, JoinPlan, JoinReport, Source
from airflow_colocate.core.paths import default_work_dir
from airflow_colocate.core.sizes import parse_size
from airflow_colocate.jobs.read import count_failovers, plan_reported
from airflow_colocate.jobs.write import finish_write, prepare_write
from airflow_colocate.planner.join import bucket_facts


def prepare_join(catalog: Catalog, query: str, tables: Mapping[str, Sequence[str] | None], *,
                 require_colocate: bool = False, disable_colocate_join: bool = False,
                 output_table: str | None = None, output_partition: str = "all", output_mode: str = "overwrite",
                 output_path: str | None = None, work_dir: str | Path | None = None,
                 job_name: str = "join", hash_budget: int | str | None = None,
                 executor_hosts: Sequence[str] | None = None,
                 join_policy: str | None = None) -> tuple[JoinPlan, WriteTicket | None]:
    """Plan the reads (colocated or fallback, with reasons) and, for a catalog output, its write.
    ``hash_budget`` (bytes or ``512m``; 0: sort-merge only) overrides the job's memory-derived budget
    for a bucket's hash-join build side (spark.bucket_join.choose_bucket_join). ``executor_hosts``: the
    hosts that run Spark executors; each bucket then reads a replica on one of them when it has one
    (placement.replica_choice), so its task can run where its files are (spark.locality).
    ``join_policy`` overrides the group's for this join (``model.reasons.JoinPolicy``)."""
    budget = None if hash_budget is None else parse_size(hash_budget, "hash_budget")
    decided, backends = plan_reported(catalog, tables, disabled=disable_colocate_join,
                                      executor_hosts=executor_hosts, policy=join_policy)
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
                    output_path=output_path, output=output, hash_budget=budget, read_notes=list(decided.notes),
                    bucket_peers=dict(decided.peers),
                    backend_hosts={b.root_uri: b.host for b in backends if b.state == "alive"},
                    bucket_facts=bucket_facts(decided.tables))
    return plan, ticket


def record_bad_replicas(catalog: Catalog, bad: Sequence[BadReplica]) -> list[str]:
    """Mark the replicas a read found wrong ``bad`` (their groups unstable with the reason)."""
    return catalog.health.mark_replicas_bad(bad) if bad else []


def fail_join(catalog: Catalog, ticket: WriteTicket | None, plan: JoinPlan, error: BaseException) -> None:
    """After a join job failed: abort its write, and record the replicas it found bad (a job that
    stopped because no replica of a bucket was exact left them next to its report)."""
    from airflow_colocate.spark.join_job import load_bad_replicas

    if ticket is not None:
        catalog.writes.abort(ticket.job_id, f"{type(error).__name__}: {error}")
    record_bad_replicas(catalog, getattr(error, "bad", None) or load_bad_replicas(plan))


def finish_join(catalog: Catalog, ticket: WriteTicket | None, report: JoinReport) -> dict:
    bad = record_bad_replicas(catalog, report.bad_replicas)
    count_failovers(report.bad_replicas)
    summary = {
        "job_id": report.job_id,
        "rows": report.rows,
        "colocate": bool(report.joins) and all(j.colocate for j in report.joins),
        "explain": report.explain,
        "joins": [{"join": j.join, "left": j.left_tables, "right": j.right_tables, "exchanges_left": j.exchanges_left,
                   "exchanges_right": j.exchanges_right, "colocate": j.colocate, "reason": j.reason,
                   "planned": j.planned, "method": j.method, "build": j.build_tables} for j in report.joins],
        "bucket_join": None if report.bucket_join is None else asdict(report.bucket_join),
        "physical_plan": report.physical_plan,  # Spark's own plan, raw; the explain above is for people
        "seconds": round(report.seconds, 2),
        "phases": report.phases,
        "preview": report.preview,
        "locality": None if report.locality is None else asdict(report.locality),
        "bad_replicas": [{"replica_id": b.replica_id, "table": b.table, "partition": b.partition, "bucket": b.bucket_seq,
                          "backend": b.backend_id, "path": b.path, "reason": b.reason} for b in report.bad_replicas],
        "marked_bad": bad,
    }
    if ticket is not None:
        summary["output"] = finish_write(catalog, ticket, report.write)
    return summary


def join_in_session(spark, catalog: Catalog, query: str, tables: Mapping[str, Sequence[str] | None], *,
                    replace_views: bool = False, **kwargs) -> dict:
    """Run the join in ``spark`` (classic or Spark Connect). The session keeps its settings and job
    group; what stays is what :func:`airflow_colocate.jobs.read.register` leaves: a temp view per
    table read (named as the query names it), its backing table in ``colocate_registered``
    (``jobs.read.unregister`` drops them). ``replace_views``: as for ``register``. On Spark Connect
    the output is a path or nothing (a catalog table's write places files with RDD tasks)."""
    from airflow_colocate.spark.join_job import run_join

    plan, ticket = prepare_join(catalog, query, tables, **kwargs)
    try:
        report = run_join(spark, plan, replace_views=replace_views)
    except BaseException as exc:
        fail_join(catalog, ticket, plan, exc)
        raise
    return finish_join(catalog, ticket, report)


__all__ = ["prepare_join", "finish_join", "fail_join", "join_in_session", "record_bad_replicas"]
