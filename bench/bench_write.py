"""Colocated write vs plain Spark on TPC-H lineitem, side by side in one run.

    .venv/bin/python bench/bench_write.py [--scale 1] [--buckets 16] [--master local[2]]
    .venv/bin/python bench/bench_write.py --small 1000 [--rounds 10] [--profile]   # the fixed cost of a small write

``--small N``: N rows into one partition of a partitioned table, in-session (``write_in_session``:
plan, Spark job, commit), against ``repartition(n, key).write.parquet`` of the same rows, at
replication 1 (target <= 2.0x). ``--profile`` prints where the time goes (catalog round trips, each
phase of the write job, and the Spark jobs launched, counted through the job group).

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
from airflow_colocate.core.contract import Source  # noqa: E402
from airflow_colocate.jobs.write import write_in_session  # noqa: E402
from airflow_colocate.planner.write import write_plan  # noqa: E402
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
        cat.backends.add((work / f"be{i}").as_uri(), name=f"be{i}")
    cat.tables.create("lineitem", columns, ["l_orderkey"], bucket_num=buckets, replication_num=replicas, colocate_with="g")
    t0 = time.perf_counter()
    ticket = cat.writes.begin("lineitem", "all")
    plan = write_plan(ticket, Source(format="parquet", path=src), str(work / "runs"))
    cat.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                          ticket.missing, {"staging_uri": plan.staging_uri})
    report = run_write(spark, plan)
    cat.writes.commit(ticket.job_id, report)
    elapsed = time.perf_counter() - t0
    cat.dispose()
    return elapsed


def _jobs(spark, group: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def small(spark, a) -> None:
    """The fixed cost of a small in-session write, side by side with a plain parquet write."""
    work = Path(tempfile.mkdtemp(prefix="bench-small-write-"))
    try:
        src = work / "src"
        extra = ["DATE'2026-01-01' AS dt"] if a.source_dt else []
        spark.range(a.small).selectExpr("id", "concat('v', id) AS name", "CAST(id * 0.5 AS DOUBLE) AS amount", *extra) \
            .coalesce(1).write.parquet(src.as_uri())
        cat = Catalog(f"sqlite:///{work / 'catalog.db'}", actor="bench")
        cat.init()
        for i in range(1, 4):
            (work / f"be{i}").mkdir(parents=True)
            cat.backends.add((work / f"be{i}").as_uri(), name=f"be{i}")
        cat.tables.create("events", [("id", "bigint"), ("name", "string"), ("amount", "double"), ("dt", "date")],
                         ["id"], bucket_num=a.buckets, replication_num=1, partition_cols=["dt"], colocate_with="g")
        source = Source(format="parquet", path=src.as_uri())
        sc = spark.sparkContext
        times: dict[str, list[float]] = {"plain": [], "colocated": []}
        jobs: dict[str, int] = {}
        phases: dict[str, float] = {}
        for i in range(a.rounds + 1):  # round 0 warms up both paths, not counted
            sc.setJobGroup(f"plain-{i}", "plain")
            t0 = time.perf_counter()
            spark.read.parquet(src.as_uri()).repartition(a.buckets, "id").write.mode("overwrite") \
                .parquet((work / "plain").as_uri())
            dt_plain = time.perf_counter() - t0
            sc.setJobGroup(f"colocated-{i}", "colocated")
            timings: dict[str, float] = {}
            t0 = time.perf_counter()
            write_in_session(spark, cat, "events", "2026-01-01" if a.source_dt else f"2026-01-{1 + i % 28:02d}", source, work_dir=work / "runs",
                             timings=timings)
            dt_ours = time.perf_counter() - t0
            if i:
                times["plain"].append(dt_plain)
                times["colocated"].append(dt_ours)
                jobs = {"plain": _jobs(spark, f"plain-{i}"), "colocated": _jobs(spark, f"colocated-{i}")}
                for k, v in timings.items():
                    phases[k] = phases.get(k, 0.0) + v / a.rounds
        sc.setLocalProperty("spark.jobGroup.id", None)
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        print(f"{a.small} rows into one partition{' (source with its dt column)' if a.source_dt else ''}, {a.buckets} buckets, replication 1, master {a.master}, "
              f"median of {a.rounds} (interleaved)")
        print(f"plain repartition+write.parquet: {med['plain']:.3f} s  ({jobs['plain']} Spark jobs)")
        print(f"colocated write_in_session:      {med['colocated']:.3f} s  ({jobs['colocated']} Spark jobs)  "
              f"ratio {med['colocated'] / med['plain']:.2f}x (target <= 2.00x)")
        if a.profile:
            print("where a colocated write's time goes (mean seconds):")
            for k, v in phases.items():
                print(f"  {k:<28} {v:.3f}")
        cat.dispose()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=0, help="rows of a small one-partition write (0: the lineitem bench)")
    ap.add_argument("--source-dt", action="store_true", help="with --small: the source holds the partition column")
    ap.add_argument("--profile", action="store_true", help="with --small: seconds per phase and Spark jobs")
    ap.add_argument("--scale", type=float, default=1)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    if a.small:
        spark = get_spark("bench-write", a.master, {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            small(spark, a)
        finally:
            spark.stop()
        return
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
