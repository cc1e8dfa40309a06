"""A colocated query's fixed driver cost, phase by phase (issue 31: target <= 0.1 s for SQL1 at 1/10).

Runs bench_seeds.py's colocated query (plan the reads from the catalog, check and register the
replicas, plan, run, the explain; what the operator does minus spark-submit) over the data
bench_seeds.py generated, in one session: ``--warmup`` queries, then ``--queries`` timed ones, and
prints per phase the median wall, Python CPU and JVM CPU (spark/timing.py). Why a script of its own:
bench_seeds.py interleaves four ways of joining, which makes a one-phase change slow to measure.
The load average is printed before and after: a figure taken under load says so.

    .venv/bin/python bench/bench_fixed_cost.py                  # SQL1, 1/10, 16 buckets, 3 + 8 queries
    .venv/bin/python bench/bench_fixed_cost.py --query SQL2 --queries 12
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_seeds  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.jobs.join import finish_join, prepare_join  # noqa: E402
from airflow_colocate.spark.join_job import run_join  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402
from airflow_colocate.spark.timing import DriverClock, phases_line  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--volume", type=int, default=10, help="1/N of the seeds' rows (data from bench_seeds.py)")
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--query", choices=["SQL1", "SQL2"], default="SQL1")
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    root = bench_seeds.DATA / f"v{a.volume}_b{a.buckets}"
    if not (root / "_done").exists():
        raise SystemExit(f"{root} has no data: run bench/bench_seeds.py --volume {a.volume} --buckets {a.buckets} once")
    sql = {"SQL1": bench_seeds.SQL1, "SQL2": bench_seeds.SQL2}[a.query].format(**bench_seeds.NAMES["colocated"])
    spark = get_spark("bench-fixed-cost", "local[2]", {
        "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": str(a.buckets),
        "spark.sql.warehouse.dir": Path(tempfile.gettempdir(), "bench-seeds-warehouse").as_uri()})
    spark.sparkContext.setLogLevel("ERROR")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="bench")
    work = Path(tempfile.mkdtemp(prefix="bench-fixed-cost-"))
    tables = {t: bench_seeds.QUERY_DAYS for t in "ABC"}
    print(f"{a.query} over {root.name}: {a.warmup} warm-ups, {a.queries} timed; load average before "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    clocks, rows = [], set()
    try:
        for i in range(a.warmup + a.queries):
            clock = DriverClock.start(spark)
            with clock.phase("catalog"):
                plan, ticket = prepare_join(cat, sql, tables, work_dir=work)
            report = run_join(spark, plan, clock=clock)
            with clock.phase("finish"):
                summary = finish_join(cat, ticket, report)
            rows.add(summary["rows"])
            if i >= a.warmup:
                clocks.append(clock)
                print(f"  {clock.line()}", flush=True)
    finally:
        spark.stop()
        cat.dispose()
        shutil.rmtree(work, ignore_errors=True)
    med = bench_seeds.driver_medians(clocks)
    print(f"rows {sorted(rows)}; load average after {os.getloadavg()[0]:.1f}")
    print(f"median {phases_line(med)}")
    print("phase: wall / python cpu / jvm cpu ms (medians)")
    for name, (wall, cpu, jvm) in med.items():
        print(f"  {name:8s} {wall * 1000:6.0f} / {cpu * 1000:4.0f} / {'-' if jvm is None else f'{jvm * 1000:.0f}'}")


if __name__ == "__main__":
    main()
