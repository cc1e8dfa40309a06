"""Colocated write vs plain Spark on TPC-H lineitem, side by side in one run.

    .venv/bin/python bench/bench_write.py [--scale 1] [--buckets 16] [--master local[2]]

Baseline: ``spark.read.parquet(src).repartition(n, l_orderkey).write.parquet(out)``. Ours: the
full ColocateWriteOperator path minus spark-submit start-up (plan in the catalog, run the write
job in the same Spark session, commit), at replication 1 and 3. Targets: <= 1.3x and <= 2.0x.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpch import tpch  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.planner.write import write_plan  # noqa: E402
from airflow_colocate.planner.contract import Source  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402
from airflow_colocate.spark.write_job import run_write  # noqa: E402


def plain(spark, src: str, out: Path, buckets: int) -> float:
    t0 = time.perf_counter()
    spark.read.parquet(src).repartition(buckets, "l_orderkey").write.mode("overwrite").parquet(out.as_uri())
    return time.perf_counter() - t0


def colocated(spark, src: str, work: Path, buckets: int, replicas: int, columns) -> float:
    shutil.rmtree(work, ignore_errors=True)
    cat = Catalog(f"sqlite:///{work / 'catalog.db'}", actor="bench")
    cat.init()
    for i in range(1, 4):
        (work / f"be{i}").mkdir(parents=True)
        cat.add_backend((work / f"be{i}").as_uri(), name=f"be{i}")
    cat.create_table("lineitem", columns, ["l_orderkey"], bucket_num=buckets, replication_num=replicas, colocate_with="g")
    t0 = time.perf_counter()
    ticket = cat.begin_write("lineitem", "all")
    plan = write_plan(ticket, Source(format="parquet", path=src), str(work / "runs"))
    cat.set_write_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                          ticket.missing, {"staging_uri": plan.staging_uri})
    report = run_write(spark, plan)
    cat.commit_write(ticket.job_id, report)
    elapsed = time.perf_counter() - t0
    cat.dispose()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    src = str(tpch("lineitem", a.scale))
    spark = get_spark("bench-write", a.master, {"spark.ui.enabled": "false"})
    columns = [(f.name, f.dataType.simpleString()) for f in spark.read.parquet(src).schema.fields]
    work = Path(tempfile.mkdtemp(prefix="bench-write-"))
    try:
        plain(spark, src, work / "warmup", a.buckets)  # JIT and file cache warm-up, not counted
        results: dict[str, list[float]] = {"plain": [], "r1": [], "r3": []}
        for _ in range(a.rounds):  # interleaved, so drift hits every variant alike
            results["plain"].append(plain(spark, src, work / "plain", a.buckets))
            results["r1"].append(colocated(spark, src, work / "r1", a.buckets, 1, columns))
            results["r3"].append(colocated(spark, src, work / "r3", a.buckets, 3, columns))
        best = {k: min(v) for k, v in results.items()}
        print(f"lineitem sf{a.scale:g}, {a.buckets} buckets, master {a.master}, best of {a.rounds}")
        print(f"plain repartition+write.parquet: {best['plain']:.1f} s")
        print(f"colocated write, replication 1:  {best['r1']:.1f} s  ratio {best['r1'] / best['plain']:.2f}x (target <= 1.30x)")
        print(f"colocated write, replication 3:  {best['r3']:.1f} s  ratio {best['r3'] / best['plain']:.2f}x (target <= 2.00x)")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
