"""Temporary copies live in the backend's tmp area, never in a replica directory; a replica
directory is checked against exactly the files the catalog recorded; gc finds what killed copies
left behind (issue 19)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs, layout, sweep
from airflow_colocate.storage.copy import copy_file
from airflow_colocate.storage.replica_dir import check_replica, replica_problem


def _backend(tmp_path, name="be1"):
    root = tmp_path / name
    replica = root / "default" / "orders_7" / "2026-11-01" / "v000001" / "b00003"
    replica.mkdir(parents=True)
    return root, replica


def test_replica_root_inverts_the_layout():
    path = layout.replica_dir("file:///data/be1/", "default", "orders", 7, "2026-11-01", 12, 3)
    assert layout.replica_root(path) == "file:///data/be1"
    assert layout.replica_root(path + "/") == "file:///data/be1"
    assert layout.replica_root("file:///data/be1/somewhere/else") is None
    assert layout.tmp_dir("file:///data/be1/") == "file:///data/be1/_colocate/tmp"


def test_a_copy_is_staged_in_the_tmp_area_then_renamed(tmp_path, monkeypatch):
    root, replica = _backend(tmp_path)
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(5000))
    monkeypatch.setattr(copy_mod, "CHUNK", 1000)
    seen = []
    real_open_write = fs.open_write

    def spy(uri):
        seen.append((uri, sorted(os.listdir(replica))))  # what a reader of the replica sees meanwhile
        return real_open_write(uri)

    monkeypatch.setattr(fs, "open_write", spy)
    n, digest = copy_file(src.as_uri(), (replica / "part-0.parquet").as_uri(), root=root.as_uri())
    assert (n, digest) == (5000, hashlib.sha256(src.read_bytes()).hexdigest())
    ((tmp_uri, listing),) = seen
    assert tmp_uri.startswith(layout.tmp_dir(root.as_uri()) + "/part-0.parquet.tmp-")
    assert replica_dir.tmp_time(fs.basename(tmp_uri)) == pytest.approx(time.time(), abs=60)
    assert listing == []  # nothing in the replica directory while the bytes were written
    assert sorted(os.listdir(replica)) == ["part-0.parquet"]
    assert os.listdir(root / "_colocate" / "tmp") == []


def test_a_failed_staged_copy_leaves_nothing(tmp_path):
    root, replica = _backend(tmp_path)
    (tmp_path / "a").write_bytes(b"hello")
    with pytest.raises(ColocateError, match="checksum mismatch"):
        copy_file((tmp_path / "a").as_uri(), (replica / "p").as_uri(), expect_sha256="0" * 64, root=root.as_uri())
    assert os.listdir(replica) == [] and os.listdir(root / "_colocate" / "tmp") == []


def test_a_copy_to_a_missing_root_is_refused_and_creates_nothing(tmp_path):
    (tmp_path / "a").write_bytes(b"hello")
    gone = tmp_path / "lost-disk"
    with pytest.raises(copy_mod.StagingError, match="does not exist"):
        copy_file((tmp_path / "a").as_uri(), (gone / "db" / "p").as_uri(), root=gone.as_uri())
    assert not gone.exists()


KILLED_COPY = """
import sys, time
from airflow_colocate.storage import copy as copy_mod, fs
copy_mod.CHUNK = 1000
real = fs.open_write
class Slow:
    def __init__(self, f): self.f = f
    def write(self, chunk):
        time.sleep(0.05)
        return self.f.write(chunk)
    def __getattr__(self, name): return getattr(self.f, name)
    def __enter__(self): return self
    def __exit__(self, *exc): self.f.close()
fs.open_write = lambda uri: Slow(real(uri))
copy_mod.copy_file(sys.argv[1], sys.argv[2], root=sys.argv[3])
"""


def test_a_killed_copy_leaves_its_temporary_file_only_in_the_tmp_area(tmp_path):
    """SIGKILL mid-copy (no cleanup runs): the replica directory holds nothing, the tmp area one
    temporary file, which gc's sweep finds once it is older than the threshold."""
    root, replica = _backend(tmp_path)
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(200_000))
    area = root / "_colocate" / "tmp"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_COPY, src.as_uri(), (replica / "part-0.parquet").as_uri(),
                             root.as_uri()])
    deadline = time.time() + 60
    while time.time() < deadline and not (area.exists() and any(p.stat().st_size > 0 for p in area.iterdir())):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert os.listdir(replica) == []
    (left,) = os.listdir(area)
    assert replica_dir.is_tmp_name(left)
    assert sweep.stale_temps(root.as_uri(), older_than_seconds=3600) == []  # a running copy is young
    assert sweep.stale_temps(root.as_uri(), older_than_seconds=0) == [fs.join(layout.tmp_dir(root.as_uri()), left)]


def test_sweep_ages_temporary_files_by_their_name_or_mtime_and_deep_walks_replica_dirs(tmp_path):
    root, replica = _backend(tmp_path)
    area = root / "_colocate" / "tmp"
    area.mkdir(parents=True)
    now = time.time()
    old = area / f"p.tmp-{int(now) - 7200}-abcdef012345"
    young = area / f"q.tmp-{int(now) - 60}-abcdef012345"
    legacy = replica / "part-0.parquet.tmp-0123456789ab"  # a 0.1 clone's temporary file, in the replica
    for p in (old, young, legacy):
        p.write_bytes(b"x")
    os.utime(legacy, (now - 7200, now - 7200))
    (replica / "part-0.parquet").write_bytes(b"data")  # a real bucket file is never swept
    (root / "_staging" / "write-1").mkdir(parents=True)
    (root / "_staging" / "write-1" / "x.tmp-0123456789ab").write_bytes(b"x")  # the catalog's gc removes staging
    uri = root.as_uri()
    assert sweep.stale_temps(uri, older_than_seconds=3600) == [fs.join(uri, "_colocate/tmp/" + old.name)]
    assert sweep.stale_temps(uri, older_than_seconds=3600, deep=True) == sorted(
        [fs.join(uri, "_colocate/tmp/" + old.name), legacy.as_uri()])
    assert len(sweep.stale_temps(uri, older_than_seconds=0, deep=True)) == 3
    assert sweep.stale_temps((tmp_path / "missing").as_uri(), older_than_seconds=0, deep=True) == []
    assert not (tmp_path / "missing").exists()


FILES = [["part-0.parquet", 100], ["part-1.parquet", 50]]


@pytest.mark.parametrize("listing, files, size, want", [
    ([("part-0.parquet", 100), ("part-1.parquet", 50)], FILES, 150, None),
    ([("part-0.parquet", 100)], FILES, 150, "missing file part-1.parquet"),
    ([("part-0.parquet", 0), ("part-1.parquet", 50)], FILES, 150,
     "file part-0.parquet holds 0 bytes, the catalog recorded 100"),
    ([("part-0.parquet", 100), ("part-1.parquet", 50), ("part-0.parquet.tmp-1700000000-abc", 70)], FILES, 150,
     "unknown file part-0.parquet.tmp-1700000000-abc (a temporary copy)"),
    ([("part-0.parquet", 100), ("part-1.parquet", 50), ("part-9.parquet", 7)], FILES, 150,
     "unknown file part-9.parquet (not committed)"),
    (None, FILES, 150, "its directory is gone"),
    # recorded before 0.2: total bytes and no temporary name
    ([("part-0.parquet", 100), ("part-1.parquet", 50)], None, 150, None),
    ([("part-0.parquet", 100)], None, 150, "holds 100 bytes in 1 files, the catalog recorded 150"),
    ([("part-0.parquet", 100), ("part-0.parquet.tmp-0123456789ab", 50)], None, 150,
     "unknown file part-0.parquet.tmp-0123456789ab (a temporary copy)"),
])
def test_replica_problem(listing, files, size, want):
    assert replica_problem(listing, files=files, size=size) == want


def test_replica_problem_names_every_kind_at_once():
    got = replica_problem([("part-0.parquet", 1), ("x.tmp-1-a", 2)], files=FILES, size=150, dirs=["sub"])
    assert got == ("missing file part-1.parquet; file part-0.parquet holds 1 bytes, the catalog recorded 100; "
                   "unknown file x.tmp-1-a (a temporary copy); unknown directory sub")


def test_check_replica_lists_a_real_directory(tmp_path):
    _, replica = _backend(tmp_path)
    (replica / "part-0.parquet").write_bytes(b"a" * 100)
    (replica / "part-1.parquet").write_bytes(b"b" * 50)
    uri = replica.as_uri()
    assert check_replica(uri, files=FILES, size=150) is None
    (replica / "nested").mkdir()
    assert check_replica(uri, files=FILES, size=150) == "unknown directory nested"
    os.rmdir(replica / "nested")
    (replica / "part-1.parquet").write_bytes(b"")
    assert check_replica(uri, files=FILES, size=150) == "file part-1.parquet holds 0 bytes, the catalog recorded 50"
    assert check_replica((tmp_path / "nowhere").as_uri(), files=FILES, size=150) == "its directory is gone"


def _base_task(tmp_path, base_files):
    """An append of no new rows to one bucket: the base replica's file is carried to be2."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, base = _backend(tmp_path, "be1")
    pq.write_table(pa.table({"k": pa.array(range(100), pa.int64())}), base / "part-00000-w1_00003.c000.snappy.parquet")
    dst = layout.replica_dir((tmp_path / "be2").as_uri(), "default", "orders", 7, "2026-11-01", 2, 3)
    (tmp_path / "be2").mkdir()
    return {"bucket": 3, "write_id": "w2", "staged": [], "replicas": [[2, dst]], "roots": [layout.replica_root(dst)],
            "base_paths": [base.as_uri()], "base_files": [base_files(base)]}


def test_an_append_carries_a_base_replica_only_if_it_holds_its_recorded_files(tmp_path):
    from airflow_colocate.storage.place import place_bucket

    def exact(base):
        return [[p.name, p.stat().st_size] for p in base.iterdir()]

    (out,) = place_bucket(_base_task(tmp_path / "ok", exact))
    assert out["rows"] == 100 and out["sizes"] == dict(exact(tmp_path / "ok" / "be1" / "default" / "orders_7" / "2026-11-01"
                                                              / "v000001" / "b00003"))

    def recorded_longer(base):  # the file on disk is shorter than what was committed: truncated
        return [[p.name, p.stat().st_size + 10] for p in base.iterdir()]

    task = _base_task(tmp_path / "short", recorded_longer)
    with pytest.raises(ColocateError, match=r"cannot append to bucket 3: its base replica .* holds \d+ bytes, the "
                                            r"catalog recorded \d+; nothing was placed"):
        place_bucket(task)
    assert not fs.exists(task["replicas"][0][1]) or replica_dir.replica_files(task["replicas"][0][1]) == []
