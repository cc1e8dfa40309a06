"""Placing a write's bucket files on their backends: staged file → primary replica → verified copies.

The write job stages one parquet file per non-empty bucket with Spark, then runs
:func:`place_bucket` once per bucket on the executors (plain Python over :mod:`~airflow_colocate.storage.fs`,
so it works on any cluster whose executors see the backend roots). The primary replica gets the
staged file under Spark's bucket file name (a rename when the file system allows it, else a copy);
every other replica is a checksum-verified copy of the primary; an append carries the base
version's files over (hard link or copy). Every copy is staged in its backend's tmp area
(``{root}/_colocate/tmp``) and renamed into the replica directory once verified, so a killed task
never leaves a partial or temporary file where Spark reads. Nothing here needs Spark or the
catalog: a task is a dict, a result is a dict, and :func:`placed_replicas` checks the results
against the plan.
"""

from __future__ import annotations

import re
from collections import Counter

from airflow_colocate.core.contract import ReplicaReport, WritePlan
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs, layout, s3

_STAGED = re.compile(r"^part-(\d+)-.*\.parquet$")


def write_id_for(plan: WritePlan) -> str:
    """The id inside bucket file names; safe for Spark's ``_<bucket>.`` file-name parser."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", plan.job_id)


def staged_buckets(staging_uri: str, bucket_num: int) -> dict[int, list[str]]:
    """bucket seq -> staged file URIs, from the writing task's index in Spark's part file names.

    ``repartition(n, cols)`` makes task b hold exactly the rows of bucket b, and with
    ``maxRecordsPerFile=0`` each task writes one file; several files of one task all belong to it.
    """
    by_task: dict[int, list[str]] = {}
    for name, _ in fs.list_files(staging_uri):
        if name.startswith((".", "_")):
            continue  # _SUCCESS, .crc
        m = _STAGED.match(name)
        if not m:
            raise ColocateError(f"unexpected file {name!r} in staging directory {staging_uri}")
        by_task.setdefault(int(m.group(1)), []).append(fs.join(staging_uri, name))
    bad = [t for t in by_task if t >= bucket_num]
    if bad:
        raise ColocateError(
            f"Spark wrote files for tasks {sorted(bad)} but there are only {bucket_num} buckets: the task index "
            f"is not the bucket seq here; refusing to place them"
        )
    return {t: sorted(f) for t, f in by_task.items()}


def families(staged: dict[int, list[str]], bucket_num: int, layout_buckets: int) -> dict[int, list[tuple[int, str]]]:
    """Staged files by layout bucket -> by map bucket (family): bucket j of the ``layout_buckets``
    layout is a subset of bucket ``j mod bucket_num`` (Spark's ``pmod``), so its file goes to that
    bucket's replica directories; [(layout bucket, file)] in layout order."""
    if layout_buckets % bucket_num:
        raise ColocateError(f"a layout of {layout_buckets} buckets is not a multiple of the {bucket_num} buckets "
                            f"of the map: refusing to place its files")
    out: dict[int, list[tuple[int, str]]] = {}
    for j in sorted(staged):
        out.setdefault(j % bucket_num, []).extend((j, f) for f in staged[j])
    return out


def bucket_tasks(plan: WritePlan, staged: dict[int, list[str]]) -> list[dict]:
    """One :func:`place_bucket` task per bucket of ``plan`` (plain dicts: they are pickled to executors).
    ``staged`` is by layout bucket: after a split (``plan.layout_buckets``), several per bucket."""
    write_id = write_id_for(plan)
    base_needed = plan.mode == "append"
    split = bool(plan.layout_buckets) and plan.layout_buckets != plan.bucket_num
    by_family = families(staged, plan.bucket_num, plan.layout_buckets or plan.bucket_num)
    return [
        {
            "bucket": b.bucket_seq,
            "write_id": write_id,
            "staged": [f for _, f in by_family.get(b.bucket_seq, [])],
            # the layout bucket of each staged file, in its name (spark.verify_job checks its rows)
            "layout": [j for j, _ in by_family.get(b.bucket_seq, [])] if split else [],
            "replicas": [[r.backend_id, r.path] for r in b.replicas],
            # the backend roots, from the layout the plan's paths were made with: tmp areas
            "roots": [layout.replica_root(r.path) for r in b.replicas],
            "base_paths": list(b.base_paths) if base_needed else [],
            "base_files": list(b.base_files) if base_needed else [],
        }
        for b in sorted(plan.buckets, key=lambda b: b.bucket_seq)
    ]


def _rows(uri: str) -> int:
    import pyarrow.parquet as pq

    with fs.open_read(uri) as f:
        return pq.read_metadata(f).num_rows


def _own_name(name: str, write_id: str) -> bool:
    return name.startswith(f"part-00000-{write_id}_") or replica_dir.is_tmp_name(name)


def _refuse_foreign(bucket: int, write_id: str, replicas: list, base_paths: list[str]) -> None:
    """Refuse a replica directory holding files this write did not produce (a planner bug must not
    make us write into a live version); our own files from a retried attempt are replaced."""
    for i, (_, path) in enumerate(replicas):
        present = [n for n, _ in fs.list_files(path, missing_ok=True) if not n.startswith(".")]
        foreign = [n for n in present if not _own_name(n, write_id)]
        if foreign and i < len(base_paths) and base_paths[i]:
            base_names = {n for n, _ in replica_dir.replica_files(base_paths[i])}
            foreign = [n for n in foreign if n not in base_names]
        if foreign:
            raise ColocateError(
                f"replica directory {path} of bucket {bucket} already holds {foreign[:3]}, which this write "
                f"({write_id}) did not produce; a write must go to a new version directory"
            )
        fs.makedirs(path)


def _check_base(bucket: int, base_paths: list[str], base_files: list) -> None:
    """An append carries the base version's files: each base directory must hold exactly what the
    catalog recorded, or the new version would inherit a missing, short or stray file."""
    for i, path in enumerate(base_paths):
        files = base_files[i] if i < len(base_files) else None
        if not path or files is None:
            continue  # recorded before 0.2: copy_replica still refuses temporary and hidden names
        problem = replica_dir.check_replica(path, files=files, size=sum(int(size) for _, size in files))
        if problem:
            raise ColocateError(
                f"cannot append to bucket {bucket}: its base replica {path} {problem}; nothing was placed. Repair it "
                f"('colocate balance --verify') or overwrite the partition")


def _place_primary(bucket: int, write_id: str, staged_files: list[str], primary: str,
                   root: str | None = None, fine: list[int] | None = None) -> tuple[list[tuple[str, str]], int, int]:
    """Move (or copy) the staged files into the primary replica: ([(name, sha256)], rows, bytes).
    ``fine``: the layout bucket of each staged file after a split, named in the file
    (:func:`~airflow_colocate.storage.layout.layout_suffix`)."""
    new_files: list[tuple[str, str]] = []
    rows_total = bytes_total = 0
    placed_of: dict[int, int] = {}
    for i, staged in enumerate(staged_files):
        if fine:
            index = placed_of.get(fine[i], 0)
            suffix = layout.layout_suffix(fine[i], index)
        else:
            index = len(new_files)
            suffix = ".c000.snappy.parquet" if index == 0 else f".c{index:03d}.snappy.parquet"
        name = layout.bucket_file_name(write_id, bucket, suffix)
        dst = fs.join(primary, name)
        if not fs.exists(staged):
            # A retried task: an earlier attempt already moved this (non-empty) file.
            if not fs.exists(dst):
                raise ColocateError(f"staged file {staged} of bucket {bucket} is gone and {dst} does not exist")
            rows = _rows(dst)
            size, digest = fs.size(dst), copy_mod.sha256_file(dst)
        else:
            rows = _rows(staged)
            if rows == 0:
                continue  # Spark writes one empty file for an empty input: not a bucket file
            if fs.can_rename(staged, dst):
                fs.rename(staged, dst)
                size, digest = fs.size(dst), copy_mod.sha256_file(dst)
            else:
                size, digest = copy_mod.copy_file(staged, dst, root=root)
        if fine:
            placed_of[fine[i]] = placed_of.get(fine[i], 0) + 1
        new_files.append((name, digest))
        rows_total += rows
        bytes_total += size
    return new_files, rows_total, bytes_total


def place_bucket(task: dict) -> list[dict]:
    """Executor side: place one bucket on all its replicas; returns one report dict per replica.

    ``task`` (see :func:`bucket_tasks`): bucket, write_id, staged (URIs), replicas ([backend_id, dir]),
    base_paths (dirs, one per replica, for an append).
    """
    bucket, write_id = task["bucket"], task["write_id"]
    replicas, base_paths = task["replicas"], list(task["base_paths"])
    roots = list(task.get("roots") or [None] * len(replicas))
    _check_base(bucket, base_paths, list(task.get("base_files") or []))
    _refuse_foreign(bucket, write_id, replicas, base_paths)

    primary = replicas[0][1]
    new_files, new_rows, new_bytes = _place_primary(bucket, write_id, task["staged"], primary, roots[0],
                                                    list(task.get("layout") or []))

    # append: the base version's files, from the same backend's base replica when there is one
    base_files: list[tuple[str, str]] = []
    base_rows = base_bytes = 0
    if base_paths and base_paths[0]:
        base_files, base_bytes = copy_mod.copy_replica(base_paths[0], primary, link=True, root=roots[0])
        base_rows = sum(_rows(fs.join(primary, n)) for n, _ in base_files)
    clash = {n for n, _ in new_files} & {n for n, _ in base_files}
    if clash:
        raise ColocateError(f"bucket {bucket}: new files {sorted(clash)} have the names of base files")

    all_files = sorted(new_files + base_files)
    expected = dict(all_files)
    checksum = replica_dir.replica_checksum(all_files)
    reports = [(replicas[0], all_files)]
    for i, (backend_id, path) in enumerate(replicas[1:], start=1):
        got: list[tuple[str, str]] = []
        for name, digest in new_files:
            copy_mod.copy_file(fs.join(primary, name), fs.join(path, name), expect_sha256=digest, root=roots[i])
            got.append((name, digest))
        if base_files:
            if i < len(base_paths) and base_paths[i]:
                carried, _ = copy_mod.copy_replica(
                    base_paths[i], path, link=True, expect={n: d for n, d in base_files}, root=roots[i]
                )
            else:  # no base replica on this backend: copy the primary's carried files
                for name, digest in base_files:
                    copy_mod.copy_file(fs.join(primary, name), fs.join(path, name), expect_sha256=digest,
                                       root=roots[i])
                carried = base_files
            got.extend(carried)
        if dict(got) != expected:
            raise ColocateError(f"replica {path} of bucket {bucket} does not match the primary {primary}")
        reports.append(((backend_id, path), sorted(got)))

    # Leftovers of an earlier attempt of this same write (an extra file, a temporary copy) must not
    # be read as part of the bucket; what stays is recorded with its size, which reads check.
    sizes: dict[str, dict[str, int]] = {}
    etags: dict[str, dict[str, str]] = {}
    for _, path in replicas:
        listing = _listing(path, etags)
        for name, _ in listing:
            if name not in expected and _own_name(name, write_id):
                fs.delete_file(fs.join(path, name))
        sizes[path] = {n: size for n, size in listing if n in expected}
        if sizes[path].keys() != expected.keys():
            raise ColocateError(f"replica {path} of bucket {bucket} lost files while it was placed: has "
                                f"{sorted(sizes[path])}, expected {sorted(expected)}")
    if len({tuple(sorted(v.items())) for v in sizes.values()}) > 1:
        raise ColocateError(f"the replicas of bucket {bucket} hold files of different sizes: {sizes}")

    return [
        {
            "bucket_seq": bucket,
            "backend_id": backend_id,
            "path": path,
            "files": [n for n, _ in files],
            "rows": new_rows + base_rows,
            "bytes": new_bytes + base_bytes,
            "checksum": checksum,
            "new_rows": new_rows,
            "sizes": sizes[path],
            "etags": {n: e for n, e in etags.get(path, {}).items() if n in expected},
        }
        for (backend_id, path), files in reports
    ]


def _listing(path: str, etags: dict[str, dict[str, str]]) -> list[tuple[str, int]]:
    """The replica's files and sizes; on an S3 API from one ``ListObjectsV2``, whose ETags go into
    ``etags[path]``: listed right after each file's SHA-256 was proven by its copy or upload, they
    are what a later repair copies against (``CopySourceIfMatch``, storage/s3.py)."""
    if s3.is_s3(path) and s3.has_client():
        found = s3.list_etags(path)
        etags[path] = {n: e for n, (_, e) in found.items()}
        return sorted((n, size) for n, (size, _) in found.items())
    return fs.list_files(path)


def placed_replicas(plan: WritePlan, placed: list[dict]) -> tuple[list[ReplicaReport], int]:
    """The replica reports of ``placed`` (the :func:`place_bucket` results) in plan order, and the
    rows the source contributed. Raises unless every planned replica was placed exactly once."""
    order = {(b.bucket_seq, r.backend_id): i for b in plan.buckets for i, r in enumerate(b.replicas)}
    got = [(r["bucket_seq"], r["backend_id"]) for r in placed]
    unlike = sorted(set(got) ^ set(order)) + sorted(k for k, n in Counter(got).items() if n > 1)
    if unlike:
        raise ColocateError(f"placement reported (bucket, backend) {unlike} unlike the plan")
    placed = sorted(placed, key=lambda r: (r["bucket_seq"], order[r["bucket_seq"], r["backend_id"]]))
    source_rows = sum(r["new_rows"] for r in placed if order[r["bucket_seq"], r["backend_id"]] == 0)
    return [ReplicaReport(**{k: v for k, v in r.items() if k != "new_rows"}) for r in placed], source_rows
