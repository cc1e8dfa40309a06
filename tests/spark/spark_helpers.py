"""Builders of write plans and read tables over local backends, for the Spark tests."""

from __future__ import annotations

import itertools
from pathlib import Path

from airflow_colocate.core.contract import BucketTarget, ReadPartition, ReadTable, ReplicaTarget, Source, WritePlan
from airflow_colocate.storage import layout

_jobs = itertools.count(1)

DB = "db"


def backend_roots(root: Path, n: int = 3) -> dict[int, str]:
    out = {}
    for i in range(1, n + 1):
        path = root / f"be{i}"
        path.mkdir(parents=True, exist_ok=True)
        out[i] = path.as_uri()
    return out


def bucket_map(bucket_num: int, replication: int, backend_ids: list[int]) -> list[list[int]]:
    """Round robin: bucket b on backends b, b+1, … (mod the number of backends)."""
    n = len(backend_ids)
    return [[backend_ids[(b + r) % n] for r in range(replication)] for b in range(bucket_num)]


def make_plan(
    tmp_path: Path,
    *,
    source: Source,
    columns: list[list[str]],
    dist_cols: list[str],
    partition_cols: list[str] | None = None,
    value: str = "2026-11-01",
    table: str = "orders",
    table_id: int = 1,
    bucket_num: int = 8,
    replication: int = 2,
    n_backends: int = 3,
    version: int = 1,
    mode: str = "overwrite",
    base_version: int | None = None,
) -> WritePlan:
    roots = backend_roots(tmp_path / "backends", n_backends)
    mapping = bucket_map(bucket_num, replication, sorted(roots))
    job_id = f"w{next(_jobs)}-{table}-v{version}"
    buckets = []
    for b, backend_ids in enumerate(mapping):
        replicas = [
            ReplicaTarget(be, layout.replica_dir(roots[be], DB, table, table_id, value, version, b)) for be in backend_ids
        ]
        base = []
        if base_version is not None:
            base = [layout.replica_dir(roots[be], DB, table, table_id, value, base_version, b) for be in backend_ids]
        buckets.append(BucketTarget(bucket_seq=b, replicas=replicas, base_paths=base))
    return WritePlan(
        job_id=job_id,
        table=f"{DB}.{table}",
        columns=columns,
        dist_cols=dist_cols,
        partition_cols=["dt"] if partition_cols is None else partition_cols,
        partition_value=value,
        bucket_num=bucket_num,
        mode=mode,
        version=version,
        source=source,
        buckets=buckets,
        staging_uri=layout.staging_dir(roots[1], job_id),
        report_uri=(tmp_path / "reports" / f"{job_id}.json").as_uri(),
    )


def read_table(plan: WritePlan, name: str, *, replica: int = 0, bucketed: bool = True, reports=None) -> ReadTable:
    """A ReadTable over one written partition, reading replica ``replica`` of every bucket (mod the
    replication), with empty buckets (rows 0) given as ''."""
    empty = set()
    if reports is not None:
        empty = {r.bucket_seq for r in reports.replicas if r.rows == 0}
    paths = []
    for b in sorted(plan.buckets, key=lambda b: b.bucket_seq):
        r = b.replicas[(replica + b.bucket_seq) % len(b.replicas)] if replica >= 0 else b.replicas[0]
        paths.append("" if b.bucket_seq in empty else r.path)
    return ReadTable(
        name=name,
        columns=plan.columns,
        dist_cols=plan.dist_cols,
        partition_cols=plan.partition_cols,
        bucket_num=plan.bucket_num,
        partitions=[ReadPartition(value=plan.partition_value, bucket_paths=paths)],
        bucketed=bucketed,
    )


def version_files(plan: WritePlan) -> list[str]:
    """Every file below the plan's target version directories (on every backend)."""
    out = []
    for b in plan.buckets:
        for r in b.replicas:
            vdir = Path(r.path.removeprefix("file://")).parent
            if vdir.exists():
                out.extend(str(p) for p in vdir.rglob("*") if p.is_file())
    return sorted(set(out))
