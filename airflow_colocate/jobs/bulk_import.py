"""Bulk import: bring years of a Hive-style partitioned dataset (``dt=…`` folders) into a table.

The control-plane steps around the one import Spark job (:mod:`airflow_colocate.spark.import_job`):

1. :func:`~airflow_colocate.jobs.import_checks.check_import` lists the ``<partition column>=<value>`` folders and refuses bad input in
   one line (no such folders, another column's folders, a value that is not a literal of the
   column's type);
2. :func:`prepare_import` skips the partitions already committed from the same source files (a
   re-run after a kill finishes the rest; the source's file names and sizes are the fingerprint
   recorded with each imported version), then begins one write per partition, as any write does;
3. the job places every partition; placed partitions are committed in batches, one catalog
   transaction each (:func:`commit_partitions`): in session while the job runs
   (:class:`BatchedCommits`), under spark-submit when the job ends — also when it failed or was
   killed, from the reports it wrote before (:func:`finish_import`);
4. partitions that were not placed are aborted: the previous version of each stays visible.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_colocate.jobs.iceberg import follow
from airflow_colocate.catalog import Catalog
from airflow_colocate.model.views import WriteTicket
from airflow_colocate.core.contract import ImportPartition, ImportPlan, ImportReport, Source, WriteReport
from airflow_colocate.core.errors import ColocateError, NotFound
from airflow_colocate.core.paths import default_work_dir
from airflow_colocate.jobs.import_checks import check_import, source_uri
from airflow_colocate.planner.bulk_import import import_plan
from airflow_colocate.planner.write import write_plan
from airflow_colocate.storage import fs
from airflow_colocate.storage.replica_dir import subdirs
from airflow_colocate.storage.plan_files import load_report


def fingerprint(folder: str) -> str:
    """The source partition's data files (names and sizes, below the folder): equal fingerprints
    mean a re-run would import the same files again."""
    files: list[str] = []

    def walk(uri: str, prefix: str) -> None:
        for name, size in fs.list_files(uri):
            if not name.startswith((".", "_")):
                files.append(f"{prefix}{name}\t{size}")
        for sub in subdirs(uri):
            if not sub.startswith((".", "_")):
                walk(fs.join(uri, sub), f"{prefix}{sub}/")

    walk(folder, "")
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:32]


def imported(catalog: Catalog, table: str, values: list[str]) -> dict[str, str]:
    """partition value -> source fingerprint, for the partitions of ``table`` whose visible version
    was written by an import."""
    t = catalog.tables.get(table)
    wanted = set(values)
    last: dict[str, dict] = {}  # value -> the newest committed import of it
    for job in catalog.jobs.list(kinds=["write"], states=["committed"], limit=10_000_000):
        plan = job.plan
        value = plan.get("import_partition")
        if plan.get("table_id") == t.id and value in wanted and plan.get("import_fingerprint"):
            if value not in last or plan["version"] > last[value]["version"]:
                last[value] = plan
    out: dict[str, str] = {}
    for value, plan in last.items():
        try:
            _, parts = catalog.reads.replicas(t.qualified_name, [value])
        except NotFound:
            continue
        if parts[0].version == plan["version"]:  # still the visible version
            out[value] = plan["import_fingerprint"]
    return out


@dataclass
class ImportJob:
    """What the control plane keeps between planning and commit."""

    table: str
    plan: ImportPlan | None
    tickets: dict[str, WriteTicket]  # partition value -> its write
    skipped: list[str]
    total: int
    committed: dict[str, dict] = field(default_factory=dict)  # value -> {rows, bytes, version}
    failed: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    first_commit: float = 0.0


def prepare_import(catalog: Catalog, table: str, source: str, *, fmt: str = "parquet",
                   partitions: list[str] | None = None, work_dir: str | Path | None = None,
                   echo=print) -> ImportJob:
    """Find the partitions, skip those already imported from the same files, begin a write for
    each of the others and build the one plan the import job gets."""
    t = catalog.tables.get(table)
    found = check_import(t, source, fmt, partitions)  # partitions and columns, before any write begins
    column = t.partition_cols[0]
    prints = {value: fingerprint(folder) for value, folder in found}
    done = imported(catalog, t.qualified_name, [v for v, _ in found])
    skipped = [v for v, _ in found if done.get(v) == prints[v]]
    todo = [(v, f) for v, f in found if done.get(v) != prints[v]]
    echo(f"import {source} into {t.qualified_name}: {len(found)} partitions, {len(skipped)} already imported "
         f"from the same files (skipped), {len(todo)} to import")
    job = ImportJob(table=t.qualified_name, plan=None, tickets={}, skipped=skipped, total=len(found))
    if not todo:
        return job
    work = str(work_dir or default_work_dir())
    parts: list[ImportPartition] = []
    staging = None
    try:
        for value, folder in todo:
            ticket = catalog.writes.begin(t.qualified_name, value, mode="overwrite",
                                         plan={"import_fingerprint": prints[value], "import_partition": value,
                                               "import_source": folder})
            job.tickets[value] = ticket
            plan = write_plan(ticket, Source(format=fmt, path=folder), work)
            staging = staging or f"{plan.staging_uri.rsplit('/', 1)[0]}/import-{ticket.job_id}"
            plan.staging_uri = staging  # one staging directory for the whole import (gc removes it)
            catalog.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                                      ticket.missing, {"staging_uri": staging})
            parts.append(ImportPartition(value=value, folder=folder, plan=plan))
    except BaseException as exc:
        abort_rest(catalog, job, f"planning the import failed: {exc}")
        raise
    first = next(iter(job.tickets.values()))
    job.plan = import_plan(f"import-{first.job_id}", t.qualified_name, source_uri(source), fmt, column, parts, staging, work)
    return job


def commit_partition(catalog: Catalog, job: ImportJob, report: WriteReport, echo=print) -> None:
    commit_partitions(catalog, job, [report], echo)


def commit_partitions(catalog: Catalog, job: ImportJob, reports: list[WriteReport], echo=print) -> None:
    """Commit placed partitions in one catalog transaction; a report the catalog refuses (files
    that do not add up, replicas that differ) leaves that partition uncommitted and the others go on."""
    todo_reports = [r for r in reports if r.partition_value not in job.committed and r.partition_value not in job.failed]
    if not todo_reports:
        return
    results = catalog.writes.commit_many([(job.tickets[r.partition_value].job_id, r) for r in todo_reports])
    # one Iceberg snapshot per batch of ours, comparing only the batch's partitions
    follow(catalog, {t.table.id for t in job.tickets.values()}, partitions=[r.partition_value for r in todo_reports])
    now = time.perf_counter()
    job.first_commit = job.first_commit or now
    todo = len(job.tickets)
    before = len(job.committed) + len(job.failed)
    for report in todo_reports:
        value = report.partition_value
        result = results[job.tickets[value].job_id]
        if isinstance(result, ColocateError):
            job.failed[value] = str(result)
            echo(f"partition {value} NOT committed: {result}")
            continue
        job.committed[value] = {"version": result.visible_version, "rows": report.source_rows,
                                "bytes": sum(r.bytes for r in report.replicas)}
    n = len(job.committed) + len(job.failed)
    step = max(1, todo // 10)
    if n == todo or n // step > before // step:
        total_bytes = sum(c["bytes"] for c in job.committed.values())
        left = f", about {(now - job.first_commit) / (n - 1) * (todo - n):.0f} s left" if n > 1 else ""
        echo(f"committed {len(job.committed)} of {todo} partitions ({total_bytes} bytes){left}")


class BatchedCommits:
    """Commits placed partitions in batches while the import runs in session: a tenth of the
    import or whatever was placed in the last second, whichever comes first, so a 100-partition
    import commits in ~10 transactions instead of 100, and a killed one loses at most a second of
    placed (not yet committed) partitions, which its re-run imports again."""

    def __init__(self, catalog: Catalog, job: ImportJob, echo=print, seconds: float = 1.0):
        self.catalog, self.job, self.echo, self.seconds = catalog, job, echo, seconds
        self.pending: list[WriteReport] = []
        self.last = time.monotonic()

    def __call__(self, report: WriteReport) -> None:
        self.pending.append(report)
        if len(self.pending) >= max(1, len(self.job.tickets) // 10) or time.monotonic() - self.last >= self.seconds:
            self.flush()

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        commit_partitions(self.catalog, self.job, pending, self.echo)
        self.last = time.monotonic()


def abort_rest(catalog: Catalog, job: ImportJob, reason: str) -> None:
    """Abort every write of the import that is not committed: its previous version stays visible."""
    for value, ticket in job.tickets.items():
        if value not in job.committed:
            job.failed.setdefault(value, reason)
            catalog.writes.abort(ticket.job_id, job.failed[value])


def partial_reports(plan: ImportPlan) -> list[WriteReport]:
    """The partition reports a failed or killed import job wrote before it stopped."""
    out = []
    for i in range(len(plan.partitions)):
        uri = plan.part_report_uri(i)
        try:
            out.append(load_report(WriteReport, uri))
        except (FileNotFoundError, OSError, ValueError):
            continue
    return out


def finish_import(catalog: Catalog, job: ImportJob, report: ImportReport | None, *, error: str | None = None,
                  echo=print) -> dict:
    """Commit each placed partition not yet committed, abort the others, and return the summary.
    With ``report`` None (the job failed or was killed), the partitions it finished are still
    committed from their own reports."""
    if job.plan is not None:
        reports = report.reports if report is not None else partial_reports(job.plan)
        commit_partitions(catalog, job, reports, echo)
        for value, reason in (report.failed if report is not None else {}).items():
            job.failed.setdefault(value, reason)
        abort_rest(catalog, job, error or "the import job did not place this partition")
    summary = import_summary(job)
    echo(f"import into {job.table}: {len(job.committed)} partitions committed, {len(job.skipped)} skipped "
         f"(already imported), {len(job.failed)} NOT committed; {summary['rows']} rows, {summary['bytes']} bytes "
         f"in {summary['seconds']:.1f}s")
    for value, reason in sorted(job.failed.items()):
        echo(f"  NOT committed {value}: {reason}")
    return summary


def import_summary(job: ImportJob) -> dict:
    return {
        "table": job.table,
        "job_id": job.plan.job_id if job.plan else None,
        "partitions": job.total,
        "committed": sorted(job.committed),
        "skipped": list(job.skipped),
        "failed": dict(sorted(job.failed.items())),
        "rows": sum(c["rows"] for c in job.committed.values()),
        "bytes": sum(c["bytes"] for c in job.committed.values()),
        "seconds": round(time.perf_counter() - job.started, 2),
    }


def run_import(catalog: Catalog, job, runner, *, echo=print) -> dict:
    """Run ``job``'s plan with ``runner`` (plan -> report) and finish it: when the runner fails, the
    partitions it finished are still committed (from their own reports) before the error goes on;
    an import that committed nothing and failed some partitions is an error."""
    if job.plan is None:
        return finish_import(catalog, job, None, echo=echo)
    try:
        report = runner(job.plan)
    except BaseException as exc:
        finish_import(catalog, job, None, error=f"{type(exc).__name__}: {exc}", echo=echo)
        raise
    summary = finish_import(catalog, job, report, echo=echo)
    if job.failed and not job.committed:
        raise ColocateError(f"import into {job.table}: no partition committed: {next(iter(job.failed.values()))}")
    return summary


def import_in_session(spark, catalog: Catalog, table: str, source: str, *, fmt: str = "parquet",
                      partitions: list[str] | None = None, work_dir: str | Path | None = None, echo=print) -> dict:
    """Import in a Spark session you have (the CLI, notebooks, tests): placed partitions are
    committed in batches while the job runs (:class:`BatchedCommits`), so a killed import keeps
    what it committed and its re-run imports the rest."""
    from airflow_colocate.spark.import_job import run_import as run_import_job

    job = prepare_import(catalog, table, source, fmt=fmt, partitions=partitions, work_dir=work_dir, echo=echo)
    commits = BatchedCommits(catalog, job, echo)
    return run_import(catalog, job, lambda plan: run_import_job(spark, plan, on_partition=commits), echo=echo)


__all__ = ["prepare_import", "commit_partition", "commit_partitions", "BatchedCommits",
           "finish_import", "run_import", "import_in_session"]
