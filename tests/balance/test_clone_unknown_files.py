"""Clones and verify see every file of a replica directory (issue 19): a clone copies only the
replica's own files from a source holding a stray one, and marks that source bad so it is repaired;
a clone into a directory with leftovers removes them; verify finds a temporary file; a killed
clone's temporary copies are removed by gc. Real files, the clone job's task function."""

from __future__ import annotations

import os
import time

from balance_lake import assert_whole, rows

from airflow_colocate.cli import main as colocate
from airflow_colocate.core.contract import CloneTask
from airflow_colocate.spark.clone_job import clone_task, verify_task
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs, layout

DAY = "2026-11-01"


def _load(lake):
    for t in ("orders", "lineitem"):
        lake.create(t)
        lake.write(t, DAY, range(0, 600, 1 if t == "orders" else 2))
    return {t: rows(lake.catalog, t) for t in ("orders", "lineitem")}


def _stray(path: str, name: str = "part-00000-x_00000.c000.snappy.parquet.tmp-0123456789ab") -> str:
    uri = fs.join(path, name)
    with open(fs.local_path(uri), "wb") as f:
        f.write(b"half a copy of some bucket file")
    return uri


def test_a_source_with_a_stray_file_is_cloned_clean_then_repaired(lake):
    """Every replica of orders holds a temporary file a 0.1 clone left inside it. The balance onto
    be4 copies only the replicas' own files and marks each source it read bad; a verify run finds
    the rest; the repairs leave no stray file anywhere and every row as written."""
    before = _load(lake)
    cat = lake.catalog
    _, (part,) = cat.reads.replicas("orders")
    for bucket in part.buckets:
        for r in bucket:
            _stray(r.path)
    lake.add_backend("be4")
    summary = lake.run()
    assert [j.state for j in summary["jobs"]] == ["done"]
    be4 = lake.names["be4"]
    moved = [r for b in cat.reads.replicas("orders")[1][0].buckets for r in b if r.backend_id == be4]
    assert moved
    for r in moved:  # the clone holds exactly the replica's files, recorded with their sizes
        assert r.files is not None and replica_dir.replica_files(r.path) == sorted(r.files)
    unclean = [e for e in cat.events(kind="replica.bad") if "holds file(s) the catalog does not list" in e.detail["reason"]]
    assert len(unclean) >= len(moved)

    summary = lake.run(verify=True)  # the replicas that did not move still hold their stray file
    assert summary["verified_bad"]
    assert_whole(cat)
    for b in cat.reads.replicas("orders")[1][0].buckets:
        for r in b:
            assert not [n for n, _ in replica_dir.replica_files(r.path) if not replica_dir.is_data_name(n)], r.path
    assert {t: rows(cat, t) for t in before} == before


def test_verify_reports_a_temporary_file_and_balance_repairs_it(lake):
    before = _load(lake)
    cat = lake.catalog
    _, (part,) = cat.reads.replicas("lineitem")
    victim = part.buckets[2][0]
    stray = _stray(victim.path)
    summary = lake.run(verify=True)
    assert victim.path in summary["verified_bad"]
    (event,) = [e for e in cat.events(kind="replica.bad") if e.subject == victim.path]
    assert "never committed" in event.detail["reason"] and "temporary copy" in event.detail["reason"]
    assert not fs.exists(stray)  # the repair cloned into the directory and removed what is no part of it
    assert_whole(cat)
    assert {t: rows(cat, t) for t in before} == before


def test_a_clone_into_a_directory_with_leftovers_removes_them(lake):
    _load(lake)
    cat = lake.catalog
    _, (part,) = cat.reads.replicas("orders")
    src = part.buckets[0][0]
    be4 = lake.add_backend("be4")
    dst = layout.replica_dir(be4.root_uri, "default", "orders", cat.tables.get("orders").id, DAY, 1, 0)
    fs.makedirs(dst)
    _stray(dst, "part-00000-old_00000.c000.snappy.parquet")
    os.makedirs(fs.local_path(fs.join(dst, "nested")))
    task = CloneTask(key="k", table="default.orders", partition_id=1, partition=DAY, version=1, bucket_seq=0,
                     backend_id=be4.id, src_backend_id=src.backend_id, src=src.path, dst=dst, checksum=src.checksum,
                     bytes=src.bytes, rows=src.rows, root=be4.root_uri)
    from dataclasses import asdict

    out = clone_task(asdict(task))
    assert out["ok"], out
    assert sorted(n for n, _ in replica_dir.replica_files(dst)) == sorted(n for n, _ in replica_dir.replica_files(src.path))
    assert replica_dir.subdirs(dst) == [] and out["sizes"] == dict(replica_dir.replica_files(src.path))
    assert os.listdir(fs.local_path(layout.tmp_dir(be4.root_uri))) == []
    ok = verify_task({"replica_id": 1, "path": dst, "checksum": src.checksum, "bytes": src.bytes})
    assert ok["ok"], ok


KILLED_CLONE = """
import json, os, sys, time
from airflow_colocate.spark import clone_job
from airflow_colocate.storage import copy as copy_mod, fs
copy_mod.CHUNK = 64
real = fs.open_write
class Slow:
    def __init__(self, f): self.f = f
    def write(self, chunk):
        time.sleep(0.01)
        return self.f.write(chunk)
    def __getattr__(self, name): return getattr(self.f, name)
    def __enter__(self): return self
    def __exit__(self, *exc): self.f.close()
fs.open_write = lambda uri: Slow(real(uri))
real_pwrite = os.pwrite
def slow_pwrite(fd, data, offset):  # the same slow disk under a local copy's raw descriptors
    time.sleep(0.01)
    return real_pwrite(fd, memoryview(data)[:64], offset)
os.pwrite = slow_pwrite
print(clone_job.clone_task(json.loads(sys.argv[1])))
"""


def test_a_killed_clones_temporary_files_are_gone_after_gc(lake, monkeypatch):
    import json
    import signal
    import subprocess
    import sys
    from dataclasses import asdict

    _load(lake)
    cat = lake.catalog
    monkeypatch.setenv("COLOCATE_CATALOG_URL", str(cat.engine.url))
    monkeypatch.setenv("COLOCATE_HOME", str(lake.root / "home"))
    _, (part,) = cat.reads.replicas("orders")
    src = max((r for b in part.buckets for r in b), key=lambda r: r.bytes)
    be4 = lake.add_backend("be4")
    dst = layout.replica_dir(be4.root_uri, "default", "orders", cat.tables.get("orders").id, DAY, 1, src.bucket_seq)
    task = CloneTask(key="k", table="default.orders", partition_id=1, partition=DAY, version=1,
                     bucket_seq=src.bucket_seq, backend_id=be4.id, src_backend_id=src.backend_id, src=src.path,
                     dst=dst, checksum=src.checksum, bytes=src.bytes, rows=src.rows, root=be4.root_uri)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CLONE, json.dumps(asdict(task))])
    area = fs.local_path(layout.tmp_dir(be4.root_uri))
    deadline = time.time() + 60
    while time.time() < deadline and not (os.path.isdir(area) and os.listdir(area)):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # mid-copy: no cleanup runs
    proc.wait()
    (left,) = os.listdir(area)
    assert replica_dir.is_tmp_name(left)
    assert not fs.exists(dst) or replica_dir.replica_files(dst) == []  # nothing where Spark reads

    assert colocate(["gc", "--stale-hours", "1", "--json"]) == 0  # a copy started seconds ago is not stale
    assert os.listdir(area) == [left]
    assert colocate(["gc", "--grace-minutes", "0", "--stale-hours", "0", "--json"]) == 0
    assert os.listdir(area) == []
