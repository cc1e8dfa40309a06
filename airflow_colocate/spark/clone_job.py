"""The clone job: copy replicas between backends and re-hash replicas, on Spark executors.

Repair and balance (clone-and-drop) hand this job a :class:`~airflow_colocate.core.contract.ClonePlan`:
``copies`` (one replica directory each, from a healthy source to its new backend) and
``verifies`` (re-hash one replica and compare with the catalog). Each task runs on an executor in
Python with the staged copy the write job uses too (:func:`airflow_colocate.storage.copy.stage_file`),
so every file goes through ``tmp, durable, rename`` (the temporary file in the destination
backend's tmp area, never in a replica directory a catalog row names) and is hashed while it is
copied; a new replica's files, in the directory its clone made, are written in place instead
(:func:`stage_clone`). The clones of one Spark partition are made durable together
(:func:`finish_clones`: one ``syncfs`` pass or two per batch instead of one ``fsync`` per file,
and the same crash rule). A clone is good
only when the sha256 of its files combine to the replica checksum the catalog holds and its size
matches; otherwise its files are deleted and the result says whether the *source* read back
different bytes (then the source replica is corrupt and the control plane marks it ``bad``).

One task failing never fails the job: every task returns a result, and the control plane
(:mod:`airflow_colocate.jobs.balance`) records good clones, marks bad sources and retries the rest.
The job never touches the catalog.

    spark-submit airflow_colocate/spark/entry.py --kind clone --plan /path/clone-plan.json

(through :mod:`airflow_colocate.spark.entry`, which writes the report or the one-line error).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass

from airflow_colocate.core.contract import (
    ClonePlan,
    CloneReport,
    CloneResult,
    VerifyResult,
)
from airflow_colocate.core.errors import ColocateError, StorageFull
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import durability
from airflow_colocate.storage import fs, layout

log = logging.getLogger("airflow_colocate.spark.clone")  # shown as colocate-clone: … (spark.entry)


def _remove(dst: str, names: list[str]) -> None:
    for name in names:
        if name.endswith("/"):
            fs.delete_tree(fs.join(dst, name.rstrip("/")))
        else:
            fs.delete_file(fs.join(dst, name))


def _entries(path: str) -> list[str]:
    """Every file and directory (``name/``) in ``path``: what a cleanup must consider."""
    return [n for n, _ in replica_dir.replica_files(path)] + [d + "/" for d in replica_dir.subdirs(path)]


def _source_files(task: dict, where: str | None = None) -> tuple[list[str], str | None, str | None]:
    """(names to copy, why the source is corrupt, which unknown files it holds) for one clone;
    ``where``: the source's OS path when it is local (its URI otherwise), which is listed.

    With the catalog's file list (``sizes``), exactly those files are copied: a missing or short
    one makes the source bad; a file the catalog does not list (a killed copy's leftover) is not
    copied and is reported, so the source is marked bad and repaired. Without it (a replica from
    before 0.2), the source's data files are copied and its temporary or hidden files reported."""
    listing, subdirs = replica_dir.replica_entries(task["src"] if where is None else where)
    sizes = task.get("sizes") or {}
    if not subdirs and len(listing) == len(sizes) and all(sizes.get(n) == size for n, size in listing):
        # the usual source: exactly the recorded files at their recorded sizes (what the general
        # rule, _compare_listing, finds too: nothing missing, short or unknown), in the listing's name order
        return [n for n, _ in listing], None, None
    return _compare_listing(task, listing, subdirs)


def _compare_listing(task: dict, listing: list[tuple[str, int]], subdirs: list[str]) -> tuple[list[str], str | None, str | None]:
    """:func:`_source_files`' general rule: the source's listing against the catalog's file list."""
    sizes = task.get("sizes") or {}
    have = dict(listing)
    dirs = [d + "/" for d in subdirs]
    if sizes:
        known = [(n, size) for n, size in listing if n in sizes]
        corrupt = replica_dir.replica_problem(known, files=list(sizes.items()), size=task["bytes"])
        names, unknown = sorted(sizes), sorted(set(have) - set(sizes)) + dirs
    else:
        corrupt = None
        names = [n for n, _ in listing if replica_dir.is_data_name(n)]
        unknown = [n for n, _ in listing if not replica_dir.is_data_name(n)] + dirs
    problem = None
    if unknown:
        problem = (f"source {task['src']} holds file(s) the catalog does not list: {', '.join(unknown[:3])}"
                   + (f" (and {len(unknown) - 3} more)" if len(unknown) > 3 else ""))
    if corrupt:
        corrupt = f"source {task['src']}: {corrupt}"
    return names, corrupt, problem


@dataclass
class _Staged:
    """A clone whose files are copied, hashed and checked in the destination's tmp area (or, a new
    replica, in place in the directory it made)."""

    task: dict
    out: dict
    files: list  # copy_mod.Staged, in name order
    before: set[str]  # what ``dst`` held before: whatever is no part of the clone is removed
    started: float


def _failed(out: dict, started: float, exc: BaseException) -> dict:
    return dict(out, error=f"{type(exc).__name__}: {exc}"[:2000], seconds=round(time.monotonic() - started, 3))


def _drop_staged(files) -> None:
    for st in files:
        try:
            copy_mod.discard(st)
        except Exception:
            pass


# A new replica (``CloneTask.fresh``) whose directory the clone makes is written in place; False
# stages every clone in the tmp area (the tests run both ways).
IN_PLACE = True


def _unlisted(task: dict) -> bool:
    """Whether a clone skips both listings: a new replica (``fresh``) from one object store to
    another, whose files and sizes the catalog recorded. Each listing is a request, where the
    copy of a file is one or two and an empty bucket's replica none at all, and neither finds what
    the copy would miss: a recorded file gone fails its copy (the source is bad), a changed one its
    checksum (the copy is deleted, the source bad), and a new replica's prefix holds at most a
    killed clone's objects of the same names, which the copies overwrite. A file the catalog does
    not list beside the source's is not copied (so never spread); reads and ``verify`` flag it."""
    recorded = bool(task.get("sizes")) or task.get("bytes") == 0  # an empty bucket's replica has no file
    return bool(task.get("fresh")) and recorded and fs.is_object_store(task["src"]) and fs.is_object_store(task["dst"])


def _recorded_etags(task: dict) -> dict:
    """The source's ETags the catalog recorded, when they name exactly the files to copy with their
    sizes (a copy proven by its ETag is proven against the recorded size too); else none."""
    etags, sizes = task.get("etags") or {}, task.get("sizes") or {}
    return etags if etags and set(etags) == set(sizes) else {}


def _staged_checksum(task: dict, names: list[str], staged: list) -> str:
    """The replica checksum of the staged copies. A copy proven by its recorded ETag has no
    SHA-256 of its own (``Staged.sha256`` None) but holds the recorded file's bytes: when every
    copy is, they are the recorded replica, whose checksum is the task's. When only some are (a
    source overwritten since its ETag was recorded is proven by its SHA-256 instead), the others'
    SHA-256 is read from the store (one HEAD each), and the whole is hashed as usual."""
    if staged and all(st.sha256 is None for st in staged):
        return task["checksum"]
    if any(st.sha256 is None for st in staged):
        from airflow_colocate.storage import s3

        for i, st in enumerate(staged):
            if st.sha256 is None:
                digest, etag = s3.stored_sha256(st.dst)
                if digest is None or etag != st.etag:
                    raise ColocateError(f"the copy {st.dst} has no SHA-256 on the store, or changed since it was made")
                staged[i] = copy_mod.Staged(st.tmp, st.dst, st.bytes, digest, st.in_place, st.inode, st.etag)
    return replica_dir.replica_checksum([(n, st.sha256) for n, st in zip(names, staged)])


def stage_clone(task: dict, areas: dict | None = None) -> dict | _Staged:
    """Phase 1 of a clone: every file copied to the destination backend's tmp area, hashed while it
    is copied and checked against the catalog's checksum and size. Returns the result when the
    clone ends here (a corrupt source, a destination that cannot stage), else the staged clone for
    :func:`publish_clone` once the batch is durable. Nothing is under a final name yet, except in
    a new replica's directory that this clone made (``fresh``: no catalog row names it, so no
    reader can look there before the clone is registered): its files are written in place
    (:func:`storage.copy.stage_in_place`). ``areas``: the tmp areas the batch has checked
    (:func:`storage.copy.staging_area`)."""
    started = time.monotonic()
    out = {"key": task["key"], "partition_id": task["partition_id"], "version": task["version"],
           "bucket_seq": task["bucket_seq"], "backend_id": task["backend_id"], "src_backend_id": task["src_backend_id"],
           "path": task["dst"], "ok": False, "rows": task["rows"]}
    expect = task.get("files") or {}
    src, dst = task["src"], task["dst"]
    root = task.get("root") or layout.replica_root(dst)
    # a local clone's directories as OS paths, converted once (listed, made); messages name the URIs
    local = fs.is_local(src) and fs.is_local(dst)
    src_at = fs.local_path(src) if fs.is_local(src) else src
    dst_at = fs.local_path(dst) if fs.is_local(dst) else dst
    staged: list = []
    sizes = task.get("sizes") or {}
    # between object stores the catalog's file list is the source's (no listing: see _unlisted)
    unlisted = _unlisted(task)
    etags = _recorded_etags(task) if fs.is_object_store(src) and fs.is_object_store(dst) else {}
    try:
        try:
            names, corrupt, source_problem = (sorted(sizes), None, None) if unlisted else _source_files(task, src_at)
        except FileNotFoundError:
            return dict(out, source_bad=True, error=f"source replica {task['src']} does not exist")
        if corrupt:
            return dict(out, source_bad=True, error=corrupt)
        if expect and sorted(expect) != names:
            return dict(out, source_bad=True, error=f"source {task['src']} holds {names}, expected {sorted(expect)}")
        # checked before the directory is made: a lost root must not come back as an empty folder
        area = copy_mod.staging_area(root, dst, areas) if root else None
        # a new directory (the usual clone) has nothing to list; a new replica's prefix is not listed
        made = True if unlisted else fs.make_dir(dst_at)
        before = set() if made else set(_entries(dst_at))
        # A new replica (no catalog row names dst) in the directory just made: nobody reads there
        # until this clone is registered, so each file is written in place, not staged and renamed.
        in_place = IN_PLACE and made and bool(task.get("fresh")) and local and area is not None and copy_mod.FAST_LOCAL
        for name in names:
            try:
                if in_place:
                    staged.append(copy_mod.stage_in_place(fs.join(src, name), fs.join(dst, name), expect.get(name)))
                    continue
                staged.append(copy_mod.stage_file(fs.join(src, name), fs.join(dst, name),
                                                  expect_sha256=expect.get(name), root=root, area=area,
                                                  expect_bytes=sizes.get(name), expect_etag=etags.get(name)))
            except (copy_mod.StagingError, StorageFull):
                raise  # the destination (its root is gone, its disk is full): retried later
            except FileNotFoundError:
                if not unlisted:
                    raise
                _drop_staged(staged)  # what the listing would have found: a recorded file is missing
                return dict(out, source_bad=True, error=f"source {task['src']}: recorded file {name} is missing")
            except ColocateError as exc:  # a listed file hashed differently: the source is corrupt
                _drop_staged(staged)
                return dict(out, source_bad=True, error=str(exc))
        total = sum(st.bytes for st in staged)
        checksum = _staged_checksum(task, names, staged)
        if checksum != task["checksum"] or total != task["bytes"]:
            _drop_staged(staged)
            return dict(out, source_bad=True, error=(
                f"source {task['src']} read back {total} bytes with replica checksum {checksum}, the catalog "
                f"recorded {task['bytes']} bytes and {task['checksum']}: the source is corrupt; the copy was deleted"))
        out.update(bytes=total, checksum=checksum, files=list(names), sizes={n: st.bytes for n, st in zip(names, staged)},
                   source_problem=source_problem,
                   etags={n: st.etag for n, st in zip(names, staged)} if all(st.etag for st in staged) else None)
        return _Staged(task, out, staged, before, started)
    except Exception as exc:  # the destination failed (disk full, permissions, ...): retried later
        _drop_staged(staged)
        return _failed(out, started, exc)


def publish_clone(c: _Staged) -> dict:
    """Phase 2, once the staged files are durable: rename them into the replica directory and
    remove what the directory held that is no part of the clone (files of an older, corrupt
    replica or of a killed copy: a read must find exactly the clone's files)."""
    dst, names, done = c.task["dst"], c.out["files"], 0  # names: the staged files' own, in their order
    try:
        for st in c.files:
            copy_mod.publish(st)
            done += 1
        if c.before:
            _remove(dst, sorted(c.before - set(names)))
        return dict(c.out, ok=True, seconds=round(time.monotonic() - c.started, 3))
    except Exception as exc:
        _drop_staged(c.files[done:])
        try:
            _remove(dst, names[:done])
        except Exception:
            pass
        return _failed(dict(c.out, bytes=0), c.started, exc)


def _unpublish(result: dict, exc: BaseException, files: list) -> dict:
    """A published clone whose directory entries could not be made durable: deleted, retried. Its
    files written in place go only while they are still its own (:func:`storage.copy.discard`)."""
    try:
        if files and all(st.in_place for st in files):
            _drop_staged(files)
        else:
            _remove(result["path"], result.get("files") or [])
    except Exception:
        pass
    return dict(result, ok=False, bytes=0, error=f"{type(exc).__name__}: {exc}"[:2000])


def _dirs(clones: list[_Staged]) -> list[str]:
    """Each clone's replica directory and the folders above it up to its backend root: what
    :func:`storage.fs.make_dir` may have created, whose entries must be durable too. Each folder
    once: the walk up stops at one already listed (a batch's clones share their partitions')."""
    out: dict[str, None] = {}
    for c in clones:
        path = c.task["dst"].rstrip("/")
        root = (c.task.get("root") or layout.replica_root(path) or fs.parent(path)).rstrip("/")
        while path.startswith(root + "/") and path not in out:
            out[path] = None
            path = fs.parent(path)
        out.setdefault(root, None)
    return list(out)


def finish_clones(staged: list[_Staged], watch: dict[int, int] | None = None) -> list[dict]:
    """Make a batch of staged clones durable, publish them, and make the renames durable.

    The crash rule a batch keeps (the same as one ``fsync`` per file, paid once per batch): the
    bytes are durable (:func:`storage.durability.make_durable`: one ``syncfs`` per destination file
    system) before any of them gets its final name, and the names are durable before a result
    says ``ok``, which is the only thing the control plane registers. A clone written in place (a
    new replica in the directory it made: :func:`stage_clone`) has its final names already; its
    bytes and names are made durable together, by the second pass, so a batch of only such clones
    (a lost disk's repair) pays one ``syncfs``. A crash anywhere before the report leaves nothing
    registered: staged files in a tmp area (gc sweeps them), or files in a replica directory no
    catalog row names as verified, which the next clone of it overwrites (removing whatever else
    it holds). A committed replica is never written to. ``watch``: the
    descriptors the batch opened before its first write (:func:`storage.durability.watch_durability`), so
    no write-back error of its pages goes unreported."""
    if not staged:
        return []
    renamed = [st.tmp for c in staged for st in c.files if not st.in_place]
    if renamed:  # bytes durable before a rename gives them their final name
        try:
            durability.make_durable(renamed, watch)
        except OSError as exc:
            for c in staged:
                _drop_staged(c.files)
            return [_failed(dict(c.out, bytes=0), c.started, exc) for c in staged]
    results = [publish_clone(c) for c in staged]
    done = [c for c, r in zip(staged, results) if r["ok"]]
    try:  # names (and the bytes of files written in place) durable before a result says ok
        durability.make_durable([st.tmp for c in done for st in c.files if st.in_place] + _dirs(done), watch)
    except OSError as exc:
        return [_unpublish(r, exc, c.files) if r["ok"] else r for c, r in zip(staged, results)]
    return results


def clone_task(task: dict) -> dict:
    """Executor side: copy one replica directory and check it against the catalog's checksum.

    Each file is staged in the destination backend's tmp area and renamed into ``dst`` once it
    is verified and durable (a new replica's, in place: :func:`stage_clone`); files in ``dst``
    that are no part of the clone are removed. One clone on its own; :func:`run_partition`
    stages many and makes them durable together."""
    staged = stage_clone(task)
    return staged if isinstance(staged, dict) else finish_clones([staged])[0]


def verify_task(task: dict) -> dict:
    """Executor side: re-hash one replica's files and compare with the catalog. Every file of the
    directory counts: a temporary or hidden file, or a directory, is one the catalog never
    committed, and Spark would read it."""
    out = {"replica_id": task["replica_id"], "ok": False}
    try:
        names = replica_dir.replica_files(task["path"])
        dirs = replica_dir.subdirs(task["path"])
    except FileNotFoundError:
        return dict(out, error=f"replica directory {task['path']} is gone")
    except Exception as exc:
        return dict(out, error=f"{type(exc).__name__}: {exc}"[:2000])
    total = sum(size for _, size in names)
    unknown = [n for n, _ in names if not replica_dir.is_data_name(n)] + [d + "/" for d in dirs]
    if unknown:
        return dict(out, bytes=total, error=(
            f"holds file(s) the catalog never committed: {', '.join(unknown[:3])}"
            + (f" (and {len(unknown) - 3} more)" if len(unknown) > 3 else "")
            + (" (a temporary copy)" if any(replica_dir.is_tmp_name(n) for n in unknown) else "")))
    try:
        digests = [(name, copy_mod.sha256_file(fs.join(task["path"], name))) for name, _ in names]
    except Exception as exc:
        return dict(out, error=f"cannot read {task['path']}: {type(exc).__name__}: {exc}"[:2000])
    checksum = replica_dir.replica_checksum(digests)
    if checksum != task["checksum"] or total != task["bytes"]:
        return dict(out, bytes=total, checksum=checksum, error=(
            f"holds {total} bytes with checksum {checksum}; the catalog recorded {task['bytes']} bytes and {task['checksum']}"))
    return dict(out, ok=True, bytes=total, checksum=checksum)


def _run(item: tuple[str, dict], areas: dict) -> dict | _Staged:
    kind, task = item
    return stage_clone(task, areas) if kind == "copy" else verify_task(task)


# A partition of at least this many tasks is staged in two halves, the first made durable and
# published on a second thread while the second is staged: the disk writes while the CPU copies,
# instead of the CPU waiting for the batch's syncfs at the end.
PIPELINE_MIN = 64


def _stage_all(items, threads: int, areas: dict) -> list:
    if threads <= 1 or len(items) <= 1:
        return [_run(i, areas) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="colocate-clone") as pool:
        return list(pool.map(lambda i: _run(i, areas), items))


@contextmanager
def _watching(items):
    """The descriptors a batch syncs through (:func:`storage.durability.watch_durability`), opened before
    its first write and closed when the batch is finished or failed."""
    watch = durability.watch_durability(t.get("root") for kind, t in items if kind == "copy")
    try:
        yield watch
    finally:
        durability.close_watch(watch)


def _finish_all(done: list, watch: dict[int, int]) -> list:
    """``done`` with each staged clone replaced by its result (:func:`finish_clones`)."""
    finished = iter(finish_clones([r for r in done if isinstance(r, _Staged)], watch))
    return [next(finished) if isinstance(r, _Staged) else r for r in done]


def run_partition(items, threads: int):
    """Executor side: the tasks of one Spark partition, ``threads`` at a time, as one batch: every
    copy is staged (copied, hashed, checked), then the batch is made durable at once and published
    (:func:`finish_clones`). Copies read and hash with the GIL released, so a few threads per core
    keep the disk busy. From :data:`PIPELINE_MIN` tasks on, two batches (every other task, so both
    get a fair share of the bytes), the first finished while the second is staged; each keeps the
    crash rule on its own, and nothing is returned before both are finished. A partition with no
    copy to a local disk (an object store's or HDFS's, durable when the request or stream ends)
    has no sync to overlap: it is one batch, so its threads wait once for the slowest copy, not twice."""
    items = list(items)
    areas: dict = {}
    if len(items) < PIPELINE_MIN or not any(kind == "copy" and fs.is_local(t["dst"]) for kind, t in items):
        with _watching(items) as watch:
            done = _finish_all(_stage_all(items, threads, areas), watch)
        return [(kind, r) for (kind, _), r in zip(items, done)]
    from concurrent.futures import ThreadPoolExecutor

    halves = [items[0::2], items[1::2]]
    # each half's own descriptors, both opened before any write; the finisher is left (and waited
    # for) before they are closed
    with (_watching(halves[0]) as first_watch, _watching(halves[1]) as second_watch,
          ThreadPoolExecutor(max_workers=1, thread_name_prefix="colocate-clone-finish") as finisher):
        finishing = finisher.submit(_finish_all, _stage_all(halves[0], threads, areas), first_watch)
        second = _finish_all(_stage_all(halves[1], threads, areas), second_watch)
        first = finishing.result()
    out: list = [None] * len(items)
    out[0::2], out[1::2] = first, second
    return [(kind, r) for (kind, _), r in zip(items, out)]


def run_chunk(items: list[tuple[str, dict]], threads: int) -> tuple[list[tuple[str, dict]], dict]:
    """A clone worker process's side of the local runner (:func:`airflow_colocate.jobs.runners.local_runner`):
    one chunk of a plan (:func:`run_partition`), and what it cost this process (CPU
    seconds, seconds and calls making bytes and names durable), which the parent cannot see."""
    started, cpu, (durable, syncs) = time.perf_counter(), time.process_time(), durability.durable_totals()
    results = run_partition(items, threads)
    durable_after, syncs_after = durability.durable_totals()
    return results, {"cpu": time.process_time() - cpu, "durable": durable_after - durable, "syncs": syncs_after - syncs,
                     "wall": time.perf_counter() - started}


def failed_result(kind: str, task: dict, error: str) -> dict:
    """The result of a task that never ran to its end (its worker process died): not ok, nothing
    copied, so the control plane retries it; whatever it left is staged in a tmp area (gc sweeps
    it) or in a directory no catalog row names as verified (the next clone overwrites it)."""
    if kind == "verify":
        return {"replica_id": task["replica_id"], "ok": False, "error": error}
    out = {k: task[k] for k in ("key", "partition_id", "version", "bucket_seq", "backend_id", "src_backend_id")}
    return dict(out, path=task["dst"], ok=False, rows=task["rows"], error=error)


def task_items(plan: ClonePlan) -> list[tuple[str, dict]]:
    """The plan's tasks as (kind, dict), copies then verifies, each biggest first (so the long
    copies do not start last). A shallow dict of the task's fields: the task functions only read
    them, and ``dataclasses.asdict`` deep-copies every file map (~0.2 ms a clone, 2,000 in a batch)."""
    items = [("copy", dict(vars(t))) for t in sorted(plan.copies, key=lambda t: -t.bytes)]
    return items + [("verify", dict(vars(t))) for t in sorted(plan.verifies, key=lambda t: -t.bytes)]


DEFAULT_THREADS = 4


def run_clone(spark, plan: ClonePlan, *, threads: int | None = None) -> CloneReport:
    """Run every copy and verify of ``plan`` as one Spark job.

    Tasks are spread biggest first over Spark partitions of about ``threads`` replicas each
    (``spark.colocate.clone.threads``, default 4), and each partition runs its replicas on that
    many threads."""
    started = time.time()
    items = task_items(plan)
    results: list[tuple[str, dict]] = []
    if items:
        sc = spark.sparkContext
        if threads is None:
            threads = int(sc.getConf().get("spark.colocate.clone.threads", str(DEFAULT_THREADS)))
        threads = max(1, threads)
        slices = min(len(items), 10_000, max(sc.defaultParallelism, -(-len(items) // threads)))
        # deal the size-sorted items round robin, so every partition gets a fair share of bytes
        dealt = [items[i::slices] for i in range(slices)]
        from airflow_colocate.spark.session import scoped

        from airflow_colocate.spark.shipping import ship_context

        ship_context(sc)  # run_partition is this package's: a cluster may never have installed it
        with scoped(spark, description=f"colocate-clone {plan.job_id}: {len(plan.copies)} copies, "
                                       f"{len(plan.verifies)} verifies"):
            results = (sc.parallelize(dealt, slices).flatMap(lambda part: part)
                       .mapPartitions(lambda it: run_partition(it, threads)).collect())
    copies = [CloneResult(**r) for kind, r in results if kind == "copy"]
    verifies = [VerifyResult(**r) for kind, r in results if kind == "verify"]
    report = CloneReport(job_id=plan.job_id, copies=copies, verifies=verifies, seconds=round(time.time() - started, 3),
                         bytes=sum(c.bytes for c in copies if c.ok), spark_version=spark.version)
    bad = sum(1 for c in copies if not c.ok) + sum(1 for v in verifies if not v.ok)
    log.info(f"{len(copies)} copies ({report.bytes} bytes) and {len(verifies)} verifies in {report.seconds:.1f}s, {bad} not ok")
    return report

