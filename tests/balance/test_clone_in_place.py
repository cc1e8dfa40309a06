"""A new replica's files are written in place (issue 29): when no catalog row names a clone's
directory (``CloneTask.fresh``) and the clone makes that directory, nobody can read there until the
clone is registered, so its files skip the tmp area and the rename, and the batch makes bytes and
names durable in one ``syncfs`` pass. Any other clone (a directory that already exists, a
replica the catalog names, a remote end) is staged and renamed as before."""

from __future__ import annotations

import hashlib
import os

import pytest

from airflow_colocate.core.contract import ClonePlan, CloneTask
from airflow_colocate.spark import clone_job
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import durability
from airflow_colocate.storage import fs


def _task(tmp_path, i: int, *, fresh: bool, data: bytes | None = None, recorded: bytes | None = None) -> CloneTask:
    src, dst = tmp_path / "src" / f"b{i}", tmp_path / "dst" / "t" / f"b{i}"
    (tmp_path / "dst" / "_colocate" / "tmp").mkdir(parents=True, exist_ok=True)
    name = f"part-{i}.parquet"
    data = data if data is not None else hashlib.sha256(str(i).encode()).digest() * (40 * (i + 1))
    recorded = data if recorded is None else recorded
    src.mkdir(parents=True)
    (src / name).write_bytes(data)
    sha = hashlib.sha256(recorded).hexdigest()
    return CloneTask(key=f"{i}:1:{i}:2", table="db.t", partition_id=i, partition="p", version=1, bucket_seq=i,
                     backend_id=2, src_backend_id=1, src=src.as_uri(), dst=dst.as_uri(),
                     checksum=replica_dir.replica_checksum([(name, sha)]), bytes=len(recorded), rows=1,
                     files={name: sha}, sizes={name: len(recorded)}, root=(tmp_path / "dst").as_uri(), fresh=fresh)


def _run(tasks, monkeypatch) -> tuple[list[dict], list, list[list[str]]]:
    published, passes = [], []
    real_publish, real_durable = copy_mod.publish, durability.make_durable
    monkeypatch.setattr(copy_mod, "publish", lambda st: (published.append(st), real_publish(st))[1])
    monkeypatch.setattr(durability, "make_durable",
                        lambda uris, watch=None: (passes.append([fs.local_path(u) for u in uris]), real_durable(uris, watch))[1])
    items = clone_job.task_items(ClonePlan(job_id="j", copies=list(tasks), report_uri=""))
    return [r for _, r in clone_job.run_partition(items, 1)], published, passes


def _holds(task: CloneTask) -> dict[str, bytes]:
    folder = fs.local_path(task.dst)
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}


def test_a_new_replica_is_written_in_place_and_made_durable_in_one_pass(tmp_path, monkeypatch):
    tasks = [_task(tmp_path, i, fresh=True) for i in range(3)]
    results, published, passes = _run(tasks, monkeypatch)
    assert all(r["ok"] for r in results), results
    assert published and all(st.in_place for st in published)
    assert len(passes) == 1  # bytes and names in one pass, after every file was written
    for t in tasks:
        folder = fs.local_path(t.dst)
        assert {os.path.join(folder, n) for n in t.sizes} | {folder} <= set(passes[0])
        assert {n: len(b) for n, b in _holds(t).items()} == t.sizes
        src = fs.local_path(t.src)
        assert _holds(t) == {n: open(os.path.join(src, n), "rb").read() for n in t.sizes}
    assert os.listdir(tmp_path / "dst" / "_colocate" / "tmp") == []


@pytest.mark.parametrize("why", ["its directory exists (a killed clone's leftovers)", "the catalog names it"])
def test_any_other_clone_is_staged_and_renamed(tmp_path, monkeypatch, why):
    task = _task(tmp_path, 0, fresh=why != "the catalog names it")
    if why.startswith("its directory exists"):
        folder = fs.local_path(task.dst)
        os.makedirs(folder)
        for name in task.sizes:  # a half-written copy under the final name, and a stray file
            open(os.path.join(folder, name), "wb").write(b"half")
        open(os.path.join(folder, "part-stray.parquet"), "wb").write(b"stray")
    (result,), published, passes = _run([task], monkeypatch)
    assert result["ok"], result
    assert published and not any(st.in_place for st in published)
    assert len(passes) == 2  # the bytes before the rename, the names before the result
    assert all("/_colocate/tmp/" in p for p in passes[0])
    assert {n: len(b) for n, b in _holds(task).items()} == task.sizes  # exactly the clone's files


def test_a_corrupt_source_written_in_place_leaves_no_file(tmp_path, monkeypatch):
    good = hashlib.sha256(b"x").digest() * 50
    task = _task(tmp_path, 0, fresh=True, data=good[:-1] + b"!", recorded=good)  # the source rotted
    ok = _task(tmp_path, 1, fresh=True)
    results, published, passes = _run([task, ok], monkeypatch)
    bad, fine = sorted(results, key=lambda r: r["key"])  # by key: the plan runs biggest first
    assert not bad["ok"] and bad["source_bad"] and "checksum mismatch" in bad["error"]
    assert fine["ok"]
    assert os.listdir(fs.local_path(task.dst)) == []  # the in-place copy was deleted
    assert [st.dst for st in published] == [f"{ok.dst}/{n}" for n in ok.sizes]


def test_a_pass_that_fails_removes_what_was_written_in_place(tmp_path, monkeypatch):
    tasks = [_task(tmp_path, i, fresh=True) for i in range(2)]

    def failing(uris, watch=None):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(durability, "make_durable", failing)
    items = clone_job.task_items(ClonePlan(job_id="j", copies=tasks, report_uri=""))
    results = [r for _, r in clone_job.run_partition(items, 1)]
    assert not any(r["ok"] for r in results) and all("Input/output error" in r["error"] for r in results)
    assert all(os.listdir(fs.local_path(t.dst)) == [] for t in tasks)  # nothing left under a final name


def test_stage_in_place_never_writes_over_a_file(tmp_path):
    src, dst = tmp_path / "a.parquet", tmp_path / "d" / "a.parquet"
    src.write_bytes(b"new bytes")
    dst.parent.mkdir()
    dst.write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        copy_mod.stage_in_place(src.as_uri(), dst.as_uri(), hashlib.sha256(b"new bytes").hexdigest())
    assert dst.read_bytes() == b"someone else's"


def test_a_failed_in_place_clone_never_deletes_another_clones_files(tmp_path, monkeypatch):
    """Two clones of one replica at once (a speculative task, two runs resuming one job): A makes
    the directory and writes in place; B, finding it there, stages and renames its own copies over
    A's and adds the rest; A then fails. A's cleanup must leave B's files, which B has reported."""
    src, dst = tmp_path / "src" / "b0", tmp_path / "dst" / "t" / "b0"
    (tmp_path / "dst" / "_colocate" / "tmp").mkdir(parents=True)
    src.mkdir(parents=True)
    data = {"part-0.parquet": b"zero" * 100, "part-1.parquet": b"one" * 100}
    for name, b in data.items():
        (src / name).write_bytes(b)
    shas = {n: hashlib.sha256(b).hexdigest() for n, b in data.items()}
    task = CloneTask(key="0:1:0:2", table="db.t", partition_id=0, partition="p", version=1, bucket_seq=0, backend_id=2,
                     src_backend_id=1, src=src.as_uri(), dst=dst.as_uri(),
                     checksum=replica_dir.replica_checksum(sorted(shas.items())), bytes=sum(map(len, data.values())),
                     rows=1, files=shas, sizes={n: len(b) for n, b in data.items()}, root=(tmp_path / "dst").as_uri(),
                     fresh=True)
    real = copy_mod.stage_in_place

    def racing(src_uri, dst_uri, expect=None):
        if dst_uri.endswith("part-1.parquet"):  # B, meanwhile: its own copies renamed into place
            for name, b in data.items():
                tmp = tmp_path / "dst" / "_colocate" / "tmp" / f"{name}.b"
                tmp.write_bytes(b)
                os.replace(tmp, dst / name)
        return real(src_uri, dst_uri, expect)

    monkeypatch.setattr(copy_mod, "stage_in_place", racing)
    (result,), published, _ = _run([task], monkeypatch)
    assert not result["ok"] and "FileExistsError" in result["error"]  # A failed (and is retried)
    assert {n: (dst / n).read_bytes() for n in data} == data  # B's files, both, untouched by A's cleanup


def test_discard_deletes_only_the_file_it_wrote(tmp_path):
    src = tmp_path / "a.parquet"
    src.write_bytes(b"bytes")
    (tmp_path / "d").mkdir()
    staged = copy_mod.stage_in_place(src.as_uri(), (tmp_path / "d" / "a.parquet").as_uri())
    other = tmp_path / "other"
    other.write_bytes(b"bytes")
    os.replace(other, tmp_path / "d" / "a.parquet")  # another copy renamed over it
    copy_mod.discard(staged)
    assert (tmp_path / "d" / "a.parquet").read_bytes() == b"bytes"  # not ours any more: kept
    mine = copy_mod.stage_in_place(src.as_uri(), (tmp_path / "d" / "b.parquet").as_uri())
    copy_mod.discard(mine)
    assert not (tmp_path / "d" / "b.parquet").exists()
