"""The listing behind the registration's replica check (spark.register.check_candidates): what is
wrong with each replica directory a read is about to register, judged exactly as
:func:`airflow_colocate.storage.replica_dir.check_replica` judges one (same rules, same messages).

Why a module of its own: a query checks every directory it reads, so this runs hundreds of times
a query and is a visible part of its fixed cost. Two things make it cheaper than one
``check_replica`` per directory on 32 threads, without checking less:

* a local directory is listed once (one ``scandir`` gives its files with their sizes and its
  sub-directories; ``check_replica`` lists it twice);
* the directories are grouped by their parent, one partition version on one backend
  (``…/<partition>/v000003/b00007``), and a group is one unit of work: a thread lists a whole
  partition's buckets, so a 5-day x 3-table read is 15 tasks, not 240. A local listing is a few
  system calls bound by the GIL, where threads cost 4x one (240 directories: 5 ms in this thread,
  19 ms on 32; bench/bench_register_check.py): local groups are listed in this thread unless the
  first group shows a slow disk (a network mount: over :data:`SLOW_LISTING` a directory), and an
  object store's groups, whose listings are requests, ``threads`` at a time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urlsplit

from airflow_colocate.core.contract import ReadReplica, ReadTable
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs

SLOW_LISTING = 0.001  # seconds a local directory: above it, local groups go to threads too


def _local_listing(path: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(name, size) of the regular files and the names of the directories in ``path``, one scandir."""
    files, dirs = [], []
    with os.scandir(path) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                files.append((e.name, e.stat(follow_symlinks=False).st_size))
            elif e.is_dir(follow_symlinks=False):
                dirs.append(e.name)
    return sorted(files), sorted(dirs)


def replica_problem(replica: ReadReplica) -> str | None:
    """What is wrong with ``replica``'s directory (None: exactly its recorded files)."""
    if not fs.is_local(replica.path):
        return replica_dir.check_replica(replica.path, files=replica.files, size=replica.bytes)
    try:
        listing, dirs = _local_listing(fs.local_path(replica.path))
    except FileNotFoundError:
        return replica_dir.replica_problem(None, files=replica.files, size=replica.bytes)
    except Exception as exc:  # noqa: BLE001 - as check_replica: the replica is bad, named with why
        return f"cannot list it: {type(exc).__name__}: {exc}"[:500]
    return replica_dir.replica_problem(listing, files=replica.files, size=replica.bytes, dirs=dirs)


def judge_replicas(replicas: Sequence[ReadReplica], threads: int) -> list[str | None]:
    """:func:`replica_problem` of every replica, in order; one task per parent directory: local
    ones in this thread while the disk is fast, the others at most ``threads`` at a time."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(replicas):
        groups.setdefault(fs.parent(r.path), []).append(i)
    out: list[str | None] = [None] * len(replicas)

    def judge(indexes: list[int]) -> None:
        for i in indexes:
            out[i] = replica_problem(replicas[i])

    todo = list(groups.values())  # a group is one parent directory: all local or all not
    if threads > 1 and todo and fs.is_local(replicas[todo[0][0]].path):
        first, started = todo.pop(0), time.perf_counter()
        judge(first)  # a local disk's listing is faster here than on threads, unless it is slow
        if (time.perf_counter() - started) / len(first) <= SLOW_LISTING:
            for indexes in [g for g in todo if fs.is_local(replicas[g[0]].path)]:
                judge(indexes)
            todo = [g for g in todo if not fs.is_local(replicas[g[0]].path)]
    if len(todo) <= 1 or threads <= 1:
        for indexes in todo:
            judge(indexes)
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(todo)), thread_name_prefix="colocate-check") as pool:
            list(pool.map(judge, todo))
    return out


__all__ = ["judge_replicas", "replica_problem"]


def _dir_key(uri: str) -> tuple[str, str]:
    """A directory as any spelling of it reads (``file:///r``, ``colocatefile:///r``, ``/r``,
    ``s3a://bucket/r``): the host part only for a file system that has one."""
    parts = urlsplit(uri)
    host = "" if parts.scheme in ("", "file", "colocatefile") else parts.netloc
    return host, unquote(parts.path).rstrip("/")


def check_listed(table: ReadTable, listed: Sequence[str], plan: ReadTable | None = None) -> None:
    """Raise when Spark's listing of a registered table lacks a file the catalog recorded for the
    replica the check found exact: a disk unmounted or a folder deleted in between lists short (an
    empty mount point lists empty, and Spark lists a partition directory that is gone as empty), and
    that bucket would read as having no rows, silently. The error names the replica as a read
    failure does, so the failover reads the bucket elsewhere. ``plan``: the table as planned, whose
    candidates carry the recorded files (the checked table keeps only the chosen paths); a replica
    set path (spark.replica_paths) matches none, and the jar's file system checks its own listing."""
    have: dict[tuple[str, str], set[str]] = {}
    for path in listed:
        folder, _, name = str(path).rpartition("/")
        have.setdefault(_dir_key(folder), set()).add(name)
    plan = plan or table
    for part, planned in zip(table.partitions, plan.partitions):
        for b, path in enumerate(part.bucket_paths):
            key = _dir_key(path)
            options = planned.candidates[b] if b < len(planned.candidates) else []
            replica = next((r for r in options if _dir_key(r.path) == key), None)
            if not path or replica is None or not replica.files:
                continue
            missing = sorted({n for n, _ in replica.files} - have.get(key, set()))
            if missing:
                raise FileNotFoundError(
                    f"replica {path} of {table.table or table.name} partition {part.value} bucket {b}: Spark listed it without "
                    f"{len(missing)} of its {len(replica.files)} recorded files ({path.rstrip('/')}/{missing[0]} does "
                    f"not exist): its disk went away after the replica check")
