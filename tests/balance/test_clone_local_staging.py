"""The clone job's local path (issue 29: less CPU per clone): each clone's directories converted to
OS paths once, the usual source (exactly its recorded files) recognised without the general
comparison, its files staged through raw descriptors. It must give the general path's results,
clone for clone, for every kind of source: whole, corrupt, holding a stray file or directory,
several files, a destination with leftovers; and a publish failing in the middle of a clone leaves
none of its files under a final name."""

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


LISTINGS = {
    "exact": ({"a": 3, "b": 5}, {"a": 3, "b": 5}, []),
    "one file": ({"a": 3}, {"a": 3}, []),
    "empty, nothing recorded": ({}, {}, []),
    "a short file": ({"a": 2, "b": 5}, {"a": 3, "b": 5}, []),
    "a missing file": ({"a": 3}, {"a": 3, "b": 5}, []),
    "a stray file": ({"a": 3, "b": 5, "b.tmp-0": 1}, {"a": 3, "b": 5}, []),
    "a stray file instead of one": ({"a": 3, "c": 5}, {"a": 3, "b": 5}, []),
    "a directory": ({"a": 3}, {"a": 3}, ["sub"]),
    "recorded before 0.2": ({"a": 3, ".hidden": 1}, {}, []),
    "recorded before 0.2, clean": ({"a": 3, "b": 4}, {}, []),
    "sizes as strings": ({"a": 3}, {"a": "3"}, []),
}


@pytest.mark.parametrize("case", LISTINGS)
def test_the_source_listing_shortcut_answers_what_the_general_rule_answers(tmp_path, case):
    files, sizes, dirs = LISTINGS[case]
    src = tmp_path / "src"
    src.mkdir()
    for name, size in files.items():
        (src / name).write_bytes(b"x" * size)
    for d in dirs:
        (src / d).mkdir()
    task = {"src": src.as_uri(), "sizes": sizes, "bytes": sum(int(s) for s in sizes.values())}
    want = clone_job._compare_listing(task, *replica_dir.replica_entries(task["src"]))  # the general rule alone
    assert clone_job._source_files(task) == want
    assert clone_job._source_files(task, str(src)) == want  # listed by its OS path, named by its URI


def _replica(folder, files: dict[str, bytes]) -> tuple[str, dict[str, str]]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return replica_dir.replica_checksum(list(digests.items())), digests


def _bytes(n: int, seed: int = 0) -> bytes:
    block = hashlib.sha256(f"{n}:{seed}".encode()).digest()
    return (block * (n // len(block) + 1))[:n]


def _plan(tmp_path, dst_name: str) -> ClonePlan:
    """Clones of every kind onto a new backend ``dst_name`` (the sources are made once)."""
    src, dst = tmp_path / "src", tmp_path / dst_name
    (dst / "_colocate" / "tmp").mkdir(parents=True, exist_ok=True)
    kinds = {
        "whole": {"part-0.parquet": _bytes(3000)},
        "several files": {f"part-{i}.parquet": _bytes(100 * (i + 1), i) for i in range(3)},
        "large": {"part-0.parquet": _bytes(copy_mod.SMALL_COPY + 5)},
        "corrupt": {"part-0.parquet": b"recorded bytes"},
        "stray file": {"part-0.parquet": b"bytes", "part-0.parquet.tmp-1700000000-ab": b"half"},
        "stray directory": {"part-0.parquet": b"bytes"},
        "leftovers at the destination": {"part-0.parquet": b"bytes"},
        "missing source": {"part-0.parquet": b"bytes"},
    }
    copies = []
    for i, (kind, files) in enumerate(kinds.items()):
        folder = src / f"p{i}" / "b00001"
        target = dst / f"p{i}" / "b00001"
        own = {n: d for n, d in files.items() if ".tmp-" not in n}
        checksum, digests = _replica(tmp_path / "recorded" / f"p{i}", own)  # what the catalog recorded
        if not folder.exists():
            _replica(folder, files)
            if kind == "corrupt":
                (folder / "part-0.parquet").write_bytes(b"recorded byteZ")
            if kind == "stray directory":
                (folder / "sub").mkdir()
            if kind == "missing source":
                for p in folder.iterdir():
                    p.unlink()
                folder.rmdir()
        if kind == "leftovers at the destination":
            _replica(target, {"part-9.parquet": b"an older replica's", "part-0.parquet": b"old"})
        copies.append(CloneTask(key=f"{i}:1:1:2", table="db.t", partition_id=i, partition=f"p{i}", version=1,
                                bucket_seq=1, backend_id=2, src_backend_id=1, src=folder.as_uri(), dst=target.as_uri(),
                                checksum=checksum, bytes=sum(len(d) for d in own.values()), rows=i + 1,
                                files=digests if kind == "several files" else {},
                                sizes={n: len(d) for n, d in own.items()}, root=dst.as_uri()))
    return ClonePlan(job_id="j1", copies=copies, report_uri="")


def _results(plan: ClonePlan, dst_name: str) -> list[dict]:
    out = []
    for _, r in clone_job.run_partition(clone_job.task_items(plan), 1):
        out.append({k: (v.replace(dst_name, "<dst>") if isinstance(v, str) else v) for k, v in r.items()
                    if k != "seconds"})
    return out


def _tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_local_path_gives_the_general_paths_results_clone_for_clone(tmp_path, monkeypatch):
    fast = _results(_plan(tmp_path, "be-fast"), "be-fast")
    monkeypatch.setattr(copy_mod, "_FAST_LOCAL", False)  # every copy through a file object and a stream
    general = _results(_plan(tmp_path, "be-general"), "be-general")
    assert fast == general
    by_kind = dict(zip(["whole", "several", "large", "corrupt", "stray file", "stray dir", "leftovers", "missing"], fast))
    assert all(by_kind[k]["ok"] for k in ("whole", "several", "large", "leftovers"))
    assert by_kind["corrupt"]["source_bad"] and "checksum" in by_kind["corrupt"]["error"]
    assert by_kind["stray file"]["ok"] and "does not list" in by_kind["stray file"]["source_problem"]
    assert by_kind["stray dir"]["ok"] and "sub/" in by_kind["stray dir"]["source_problem"]
    assert by_kind["missing"]["source_bad"] and "does not exist" in by_kind["missing"]["error"]
    assert _tree(tmp_path / "be-fast") == _tree(tmp_path / "be-general")  # the same files, nothing staged left
    assert os.listdir(tmp_path / "be-fast" / "_colocate" / "tmp") == []


def test_a_publish_failing_in_the_middle_of_a_clone_leaves_none_of_its_files(tmp_path, monkeypatch):
    plan = _plan(tmp_path, "be-pub")
    task = dict(vars(plan.copies[1]))  # three files
    staged = clone_job.stage_clone(task, {})
    assert isinstance(staged, clone_job._Staged) and len(staged.files) == 3
    durability.make_durable([st.tmp for st in staged.files])
    real, calls = copy_mod.publish, []

    def failing(st):
        calls.append(st)
        if len(calls) == 2:  # as publish fails: its staged file removed, then the error
            fs.delete_file(st.tmp)
            raise OSError(28, "No space left on device")
        real(st)

    monkeypatch.setattr(copy_mod, "publish", failing)
    result = clone_job.publish_clone(staged)
    assert result["ok"] is False and result["bytes"] == 0 and "No space left" in result["error"]
    assert os.listdir(fs.local_path(task["dst"])) == []  # the first file published is removed again
    assert os.listdir(tmp_path / "be-pub" / "_colocate" / "tmp") == []  # the third never published: dropped


WALK = ["file:///r/db/t_1/p/v000001/b00001", "file:///r/db/t_1/p/v000001", "file:///r/db/t_1/p", "file:///r/db/t_1",
        "file:///r/db", "file:///r", "file:///r/db/t_1/p/v000001/b00002"]


@pytest.mark.parametrize("dst, root, expected", [
    ("file:///r/db/t_1/p/v000001/b00001", "file:///r", WALK),
    ("file:///r/db/t_1/p/v000001/b00001/", "file:///r/", WALK),  # trailing slashes change nothing
    ("/r/db/t_1/p/v000001/b00001", None,  # no root given: the replica's own root (layout.replica_root)
     [w.removeprefix("file://") for w in WALK]),
    ("file:///elsewhere/b00001", "file:///r", ["file:///r"]),  # outside its root: only the root itself
])
def test_the_directories_made_durable_are_the_walk_up_to_the_root(dst, root, expected):
    """Each clone's directory and every folder above it up to its backend root, each once, the
    second clone's walk stopping at the partition folder the first one listed."""
    sibling = dst.replace("b00001", "b00002")
    clones = [clone_job._Staged({"dst": d, "root": root}, {}, [], set(), 0.0) for d in (dst, sibling)]
    assert clone_job._dirs(clones) == expected
