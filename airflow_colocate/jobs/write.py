"""The control-plane steps around a write: the table (created on first use, else checked against
what the caller describes), the source read, the plan in the catalog, then the report checked and
committed. Operators run the Spark job with spark-submit in between; :func:`write_in_session`
runs it in a Spark session you already have (notebooks, tests, benchmarks). Both take the same
steps from here, so a task and a notebook create, check and refuse alike."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from airflow_colocate.jobs.iceberg import ensure_published, follow
from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source, WritePlan, WriteReport
from airflow_colocate.core.errors import InvalidArgument, SchemaMismatch
from airflow_colocate.core.paths import default_work_dir
from airflow_colocate.jobs.full_disk import full_backend
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.model.views import WriteTicket, group_full_name
from airflow_colocate.planner.reads import read_table
from airflow_colocate.planner.write import write_plan


SCHEMA_EVOLUTIONS = (None, "add_columns")


def check_schema_evolution(value: str | None) -> str | None:
    if value == "":
        value = None
    if value not in SCHEMA_EVOLUTIONS:
        raise InvalidArgument(f"invalid schema_evolution {value!r}: expected None (a source column the table lacks "
                              f"is refused) or 'add_columns' (it is added to the table)")
    return value


@dataclass(frozen=True)
class TableSpec:
    """A table as a task or a notebook describes it: created from this on first use, and compared
    with the catalog's table on every later write (a DAG and a catalog that disagree stop the write)."""

    columns: str | Sequence[tuple[str, str]]
    dist_cols: Sequence[str]
    bucket_num: int
    replication_num: int = 1
    partition_col: str | None = None
    colocate_with: str | None = None


def ensure_table(catalog: Catalog, table: str, spec: TableSpec | None, *, retention_days: int | None = None,
                 iceberg: bool | None = None, iceberg_warehouse: str | None = None) -> None:
    """``table`` exists as ``spec`` says (created now if it does not), or the write stops naming
    every difference; with no ``spec`` it must exist. ``retention_days``: set when it differs;
    ``iceberg``: its Iceberg publication turned on or off when it is not yet (before the write, so
    a refusal changes nothing and the write's commit publishes)."""
    if spec is None:
        catalog.tables.get(table)  # must exist: a clear NotFound otherwise
    else:
        if not spec.dist_cols or not spec.bucket_num:
            raise InvalidArgument(f"creating {table} needs dist_cols and bucket_num as well as columns")
        cols = parse_columns(spec.columns) if isinstance(spec.columns, str) else list(spec.columns)
        parts = [spec.partition_col] if spec.partition_col else []
        t = catalog.tables.create(table, cols, list(spec.dist_cols), bucket_num=spec.bucket_num,
                                  replication_num=spec.replication_num, partition_cols=parts,
                                  colocate_with=spec.colocate_with, if_not_exists=True, retention_days=retention_days)
        wanted = {"distribution columns": list(spec.dist_cols), "bucket count": spec.bucket_num,
                  "replication_num": spec.replication_num, "partition columns": parts,
                  "colocation group": _group_named(spec.colocate_with, t.group_id)}
        have = {"distribution columns": list(t.dist_cols), "bucket count": t.bucket_num,
                "replication_num": t.replication_num, "partition columns": list(t.partition_cols),
                "colocation group": t.group_name}
        diffs = [f"{k} is {have[k]!r} in the catalog, {wanted[k]!r} in the task" for k in wanted if wanted[k] != have[k]]
        if diffs:
            raise SchemaMismatch(f"table {t.qualified_name} already exists and differs from this task: " + "; ".join(diffs)
                                 + " (alter the table with 'colocate table alter', or fix the task)")
    if retention_days is not None and catalog.tables.get(table).retention_days != retention_days:
        catalog.partitions.set_retention(table, retention_days)
    ensure_published(catalog, table, iceberg, warehouse=iceberg_warehouse)


def _group_named(name: str | None, table_group: str | None) -> str | None:
    """The full name of the group a task names, as the catalog shows a table's group: a name is
    looked up in the table's database, whose id leads the table's group id (``dbId.grpId``)."""
    if not name or table_group is None:
        return name or None
    return group_full_name(int(table_group.split(".")[0]), name)


SOURCE_FORMATS = ("parquet", "csv", "json", "orc")


def source_of(catalog: Catalog, *, path: str | None = None, fmt: str = "parquet", options: Mapping[str, str] | None = None,
              query: str | None = None, tables: Mapping[str, Sequence[str] | None] | None = None) -> Source:
    """What the write job reads: files at ``path`` (checked to exist when local), or ``query`` over
    catalog ``tables`` (name -> partitions or None), each read from verified replicas on alive backends."""
    if bool(path) == bool(query):
        raise InvalidArgument("give exactly one of source (a path) or source_query (Spark SQL over catalog tables)")
    if path:
        if fmt not in SOURCE_FORMATS:
            raise InvalidArgument(f"invalid source_format {fmt!r}: expected parquet, csv, json or orc")
        local = path.removeprefix("file://")
        if "://" not in local and not any(c in local for c in "*?[{") and not os.path.exists(local):
            raise InvalidArgument(f"source path {path!r} does not exist: check the path (and its templated date)")
        return Source(format=fmt, path=path, options=dict(options or {}))
    available = {b.id for b in catalog.backends.list() if b.state == "alive"}
    read = []
    for name, parts in (tables or {}).items():
        view, replicas = catalog.reads.replicas(name, parts)
        read.append(read_table(view, replicas, available=available, name=name.rpartition(".")[2], bucketed=False))
    return Source(query=query, tables=read)


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
    # after ours, never failing it (a lag is recorded instead); only this partition's files changed
    follow(catalog, [ticket.table.id], partitions=[ticket.partition_value])
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
                     timings: dict | None = None, schema_evolution: str | None = None,
                     spec: TableSpec | None = None, retention_days: int | None = None) -> dict:
    """Plan, run the write job in ``spark`` and commit, as the write operator does (``spec``: create
    the table on first use, check it after; :func:`ensure_table`). ``timings`` (when given)
    receives the seconds of the catalog steps and of each phase of the job."""
    from airflow_colocate.spark.write_job import timed, run_write

    with timed(timings, "catalog: plan"):
        if spec is not None or retention_days is not None:
            ensure_table(catalog, table, spec, retention_days=retention_days)
        ticket, plan = prepare_write(catalog, table, partition, source, mode=mode, work_dir=work_dir,
                                     schema_evolution=schema_evolution)
    try:
        report = run_write(spark, plan, timings)
    except BaseException as exc:
        catalog.writes.abort(ticket.job_id, f"{type(exc).__name__}: {exc}")
        full = full_backend(catalog, exc, f"the write of {plan.table} {partition}")
        if full is not None:
            raise full from exc
        raise
    with timed(timings, "catalog: commit"):
        return finish_write(catalog, ticket, report)


__all__ = ["TableSpec", "ensure_table", "finish_write", "prepare_write", "source_of", "write_in_session"]
