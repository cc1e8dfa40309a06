"""Placing one bucket on real files without Spark: what the write job's executors run per bucket."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import make_plan

from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import layout
from airflow_colocate.storage.replica_dir import replica_checksum
from airflow_colocate.storage.place import (
    bucket_tasks,
    place_bucket,
    placed_replicas,
    staged_buckets,
    write_id_for,
)

COLUMNS = [["k", "bigint"], ["dt", "date"]]


def staged_file(staging: Path, task: int, rows: int, start: int = 0) -> Path:
    """A file as Spark's task ``task`` writes it to the staging directory."""
    staging.mkdir(parents=True, exist_ok=True)
    path = staging / f"part-{task:05d}-0a1b-c000.snappy.parquet"
    pq.write_table(pa.table({"k": pa.array(range(start, start + rows), pa.int64())}), path)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def test_primary_gets_the_staged_file_and_replicas_verified_copies(tmp_path):
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=COLUMNS, dist_cols=["k"],
                     bucket_num=2, replication=3)
    staging = local(plan.staging_uri)
    data = staged_file(staging, 1, 50)
    empty = staged_file(staging, 0, 0)  # Spark writes one empty file for an empty input
    digest = sha(data)
    staged = staged_buckets(plan.staging_uri, 2)
    tasks = bucket_tasks(plan, staged)
    assert [t["bucket"] for t in tasks] == [0, 1] and tasks[1]["write_id"] == write_id_for(plan)

    name = layout.bucket_file_name(write_id_for(plan), 1)
    out = place_bucket(tasks[1])
    assert not data.exists()  # renamed into the primary, not copied
    assert [r["backend_id"] for r in out] == [r.backend_id for r in plan.buckets[1].replicas]
    for r in out:
        assert r["files"] == [name] and r["rows"] == 50 and r["new_rows"] == 50
        assert sha(local(r["path"]) / name) == digest
        assert r["checksum"] == replica_checksum([(name, digest)])
        assert r["bytes"] == (local(r["path"]) / name).stat().st_size

    empty_out = place_bucket(tasks[0])
    assert all(r["files"] == [] and r["rows"] == 0 for r in empty_out)
    assert all(os.listdir(local(r["path"])) == [] for r in empty_out)  # the empty file is not a bucket file
    assert empty.exists()  # left in staging, which the job deletes as a whole

    # A retried task (the staged file is already gone) places the same bucket again.
    assert place_bucket(tasks[1]) == out

    replicas, source_rows = placed_replicas(plan, list(reversed(empty_out + out)))
    assert source_rows == 50
    assert [(r.bucket_seq, r.backend_id) for r in replicas] == [
        (b.bucket_seq, t.backend_id) for b in plan.buckets for t in b.replicas]


def test_placed_replicas_must_match_the_plan(tmp_path):
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=COLUMNS, dist_cols=["k"],
                     bucket_num=1, replication=2)
    results = [{"bucket_seq": 0, "backend_id": r.backend_id, "path": r.path, "files": [], "rows": 0, "bytes": 0,
                "checksum": "c", "new_rows": 0} for r in plan.buckets[0].replicas]
    with pytest.raises(ColocateError, match=r"placement reported \(bucket, backend\) \[\(0, 2\)\] unlike the plan"):
        placed_replicas(plan, results[:1])
    with pytest.raises(ColocateError, match=r"\[\(0, 1\)\] unlike the plan"):
        placed_replicas(plan, results + results[:1])


def test_refuses_a_directory_with_files_it_did_not_write(tmp_path):
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=COLUMNS, dist_cols=["k"],
                     bucket_num=1, replication=2)
    staged_file(local(plan.staging_uri), 0, 10)
    second = local(plan.buckets[0].replicas[1].path)
    second.mkdir(parents=True)
    (second / "part-00000-live_00000.c000.snappy.parquet").write_bytes(b"live")
    task = bucket_tasks(plan, staged_buckets(plan.staging_uri, 1))[0]
    with pytest.raises(ColocateError, match="already holds .*did not produce"):
        place_bucket(task)
    assert (second / "part-00000-live_00000.c000.snappy.parquet").read_bytes() == b"live"
    assert not list(local(plan.buckets[0].replicas[0].path).glob("*"))  # nothing placed anywhere
    assert list(local(plan.staging_uri).glob("part-*"))  # the staged file is still there


def test_append_carries_the_base_files_to_every_replica(tmp_path):
    base = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=COLUMNS, dist_cols=["k"],
                     bucket_num=1, replication=2)
    staged_file(local(base.staging_uri), 0, 20)
    base_out = place_bucket(bucket_tasks(base, staged_buckets(base.staging_uri, 1))[0])

    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=COLUMNS, dist_cols=["k"],
                     bucket_num=1, replication=2, version=2, mode="append", base_version=1)
    staged_file(local(plan.staging_uri), 0, 5, start=100)
    out = place_bucket(bucket_tasks(plan, staged_buckets(plan.staging_uri, 1))[0])
    base_name = base_out[0]["files"][0]
    new_name = layout.bucket_file_name(write_id_for(plan), 0)
    assert {r["checksum"] for r in out} == {out[0]["checksum"]}  # byte-identical replicas
    for r in out:
        assert sorted(r["files"]) == sorted([base_name, new_name])
        assert r["rows"] == 25 and r["new_rows"] == 5
        assert sha(local(r["path"]) / base_name) == sha(local(base_out[0]["path"]) / base_name)
    replicas, source_rows = placed_replicas(plan, out)
    assert source_rows == 5 and [r.rows for r in replicas] == [25, 25]
