"""Clone job vs ``cp`` of the same replica files, side by side in one run.

    .venv/bin/python bench/bench_clone.py [--mib 1024] [--replicas 32] [--master local[2]] [--rounds 3]

Builds ``--replicas`` replica directories (one incompressible parquet-named file each, ``--mib``
in total) on a source backend, then alternates, ``--rounds`` times:

* ``cp -r`` of the source tree to a fresh directory (the baseline), and
* the Spark clone job (:func:`airflow_colocate.spark.clone_job.run_clone`) copying every replica
  to a fresh backend directory, each file hashed while copied into the tmp area, the batch made durable
  with one ``syncfs`` per file system, then renamed into place, and the replica
  checksum compared with the catalog's — i.e. what repair and balance run.

The best round of each is reported as bytes/s, and the ratio clone/cp (target >= 0.8). ``cp``
does not fsync; the line ``cp + sync`` shows the baseline with the durability the clone job has.
The source files are in the page cache for both (written just before).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from airflow_colocate.core.contract import ClonePlan, CloneTask
from airflow_colocate.spark.clone_job import run_clone
from airflow_colocate.spark.session import get_spark
from airflow_colocate.storage.replica_dir import replica_checksum

CHUNK = 4 << 20


def make_source(root: Path, total_mib: int, replicas: int) -> list[tuple[Path, str, int]]:
    """(replica dir, replica checksum, bytes) for ``replicas`` one-file replica directories."""
    per_file = max(1, total_mib * (1 << 20) // replicas)
    out = []
    for b in range(replicas):
        d = root / "default" / "t_1" / "2026-11-01" / "v000001" / f"b{b:05d}"
        d.mkdir(parents=True)
        name = f"part-00000-bench_{b:05d}.c000.snappy.parquet"
        h = hashlib.sha256()
        left = per_file
        with open(d / name, "wb") as f:
            while left:
                block = os.urandom(min(CHUNK, left))
                h.update(block)
                f.write(block)
                left -= len(block)
        out.append((d, replica_checksum([(name, h.hexdigest())]), per_file))
    return out


def time_cp(src: Path, dst: Path, sync: bool, verify: bool = False) -> float:
    shutil.rmtree(dst, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    if sync:
        subprocess.run(["sync"], check=True)
    if verify:  # what the clone job checks, with standard tools: sha256 of every copied file
        files = [str(p) for p in dst.rglob("*.parquet")]
        subprocess.run(["sha256sum", *files], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def time_clone(spark, replicas, src_root: Path, dst_root: Path, work: Path, label: str) -> float:
    shutil.rmtree(dst_root, ignore_errors=True)
    dst_root.mkdir(parents=True)
    tasks = []
    for i, (d, checksum, size) in enumerate(replicas):
        dst = dst_root / d.relative_to(src_root)
        tasks.append(CloneTask(key=f"1:1:{i}:2", table="default.t", partition_id=1, partition="2026-11-01", version=1,
                               bucket_seq=i, backend_id=2, src_backend_id=1, src=d.as_uri(), dst=dst.as_uri(),
                               checksum=checksum, bytes=size, rows=0))
    plan = ClonePlan(job_id=label, copies=tasks, report_uri=str(work / label / "report.json"))
    t0 = time.perf_counter()
    report = run_clone(spark, plan)
    elapsed = time.perf_counter() - t0
    bad = [c for c in report.copies if not c.ok]
    if bad:
        raise SystemExit(f"clone failed: {bad[0].error}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="total size of the replicas (default 1024 MiB)")
    parser.add_argument("--replicas", type=int, default=32, help="number of replica directories (default 32)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4, help="copies per Spark task at a time (default 4)")
    parser.add_argument("--dir", help="where to put the files (default: a temporary directory)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-clone-", dir=args.dir))
    try:
        src = base / "be1"
        replicas = make_source(src, args.mib, args.replicas)
        total = sum(size for _, _, size in replicas)
        spark = get_spark("bench-clone", master=args.master, conf={
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.colocate.clone.threads": str(args.threads)})
        spark.sparkContext.setLogLevel("ERROR")
        spark.sparkContext.parallelize(range(4), 2).count()  # start the Python workers
        cp, cp_sync, cp_verify, clone = [], [], [], []
        for r in range(args.rounds):
            cp.append(time_cp(src, base / "cp", sync=False))
            clone.append(time_clone(spark, replicas, src, base / "be2", base / "runs", f"bench-{r}"))
            cp_sync.append(time_cp(src, base / "cp", sync=True))
            cp_verify.append(time_cp(src, base / "cp", sync=True, verify=True))
        spark.stop()
        mib = total / (1 << 20)
        best_cp, best_sync, best_verify, best_clone = min(cp), min(cp_sync), min(cp_verify), min(clone)
        print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
        print(f"data: {args.replicas} replicas, {mib:.0f} MiB, master {args.master}, {args.threads} threads per task, "
              f"{os.cpu_count()} cpus, best of {args.rounds}")
        print(f"cp -r:          {best_cp:7.3f} s  {mib / best_cp:8.1f} MiB/s")
        print(f"cp -r + sync:   {best_sync:7.3f} s  {mib / best_sync:8.1f} MiB/s")
        print(f"cp + sync + sha256sum: {best_verify:7.3f} s  {mib / best_verify:8.1f} MiB/s  (a verified copy with standard tools)")
        print(f"clone job:      {best_clone:7.3f} s  {mib / best_clone:8.1f} MiB/s  (sha256 + one syncfs per batch + checksum check)")
        print(f"ratio clone/cp: {best_cp / best_clone:.2f}x (target >= 0.8)")
        print(f"ratio clone/(cp + sync): {best_sync / best_clone:.2f}x")
        print(f"ratio clone/(cp + sync + sha256sum): {best_verify / best_clone:.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
