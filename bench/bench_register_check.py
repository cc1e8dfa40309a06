"""How long registration's replica check takes for a 30-day x 64-bucket read (1,920 directories),
on local disk, with 1, 8 and 32 threads.

    .venv/bin/python bench/bench_register_check.py [--days 30] [--buckets 64] [--root /tmp/x]

Each directory holds one file; every one is listed and compared with its recorded name and size.
On an object store a listing is a request (tens of milliseconds), which is what the threads are
for; on a local disk the check is bound by the GIL and the file system's metadata cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable
from airflow_colocate.spark.register import check_candidates


def lake(root: Path, days: int, buckets: int) -> ReadTable:
    parts = []
    for d in range(days):
        cands = []
        for b in range(buckets):
            path = root / f"2026-10-{d + 1:02d}" / "v000001" / f"b{b:05d}"
            path.mkdir(parents=True)
            name = f"part-00000-w_{b:05d}.c000.snappy.parquet"
            (path / name).write_bytes(os.urandom(64))
            cands.append([ReadReplica(replica_id=d * buckets + b, backend_id=1, path=path.as_uri(), bytes=64,
                                      files=[[name, 64]])])
        parts.append(ReadPartition(value=f"2026-10-{d + 1:02d}", bucket_paths=[c[0].path for c in cands],
                                   candidates=cands))
    return ReadTable(name="t", columns=[["id", "bigint"], ["dt", "date"]], dist_cols=["id"], partition_cols=["dt"],
                     bucket_num=buckets, partitions=parts, table="default.t")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--buckets", type=int, default=64)
    ap.add_argument("--root", default=None)
    args = ap.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="colocate-bench-check-"))
    try:
        table = lake(root / "lake", args.days, args.buckets)
        for threads in (1, 8, 32):
            started = time.perf_counter()
            got = check_candidates([table], threads=threads)
            took = time.perf_counter() - started
            assert not got.bad and got.checked == args.days * args.buckets
            print(f"{got.checked} directories, {threads:>2} threads: {took * 1000:.0f} ms "
                  f"({took / got.checked * 1e6:.0f} us per directory)")
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
