"""The seeds' SQL1 and SQL2, colocated, with the bucket join and the read checks varied, interleaved
round by round on the same data (the lake bench_seeds.py generated): where a colocated query's time
goes, and the measurement behind spark.bucket_join.hash_pays_off.

    .venv/bin/python bench/bench_seeds_variants.py [--volume 10] [--rounds 4]

Variants: ``auto`` (the join job's own choice: the sort-merge join over buckets read in key order,
for both), ``hash`` (a hash join forced wherever the build side fits), ``smj`` (hash budget 0:
sort-merge), ``smj-resort`` (sort-merge with Spark sorting each bucket again, as without the jar's
ordered bucket read), ``smj-noguard`` (sort-merge without the row guard), ``smj-nocrc``
(sort-merge without parquet page checksums). Prints the median wall and task CPU seconds of rounds
2..n (round 1 warms up). Run bench_seeds.py --volume N first: it generates the data.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import bench_seeds as seeds  # noqa: E402
from bench_join import task_cpu  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.jobs.join import prepare_join  # noqa: E402
from airflow_colocate.spark import register  # noqa: E402
from airflow_colocate.spark import bucket_join  # noqa: E402
from airflow_colocate.spark.bucket_join import hash_pays_off  # noqa: E402
from airflow_colocate.spark.join_job import run_join  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402

VARIANTS = {"auto": {}, "hash": {"force_hash": True}, "smj": {"budget": 0},
            "smj-resort": {"budget": 0, "sorted_scan": False},
            "smj-noguard": {"budget": 0, "guard": False}, "smj-nocrc": {"budget": 0, "checksum": False}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--volume", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--buckets", type=int, default=16)
    a = ap.parse_args()
    root = seeds.DATA / f"v{a.volume}_b{a.buckets}"
    if not (root / "_done").exists():
        sys.exit(f"no data under {root}: run bench/bench_seeds.py --volume {a.volume} first")
    spark = get_spark("bench-seeds-variants", "local[2]",
                      {"spark.ui.enabled": "true", "spark.ui.showConsoleProgress": "false",
                       "spark.sql.shuffle.partitions": str(a.buckets)})
    spark.sparkContext.setLogLevel("ERROR")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="bench")
    work = Path(tempfile.mkdtemp(prefix="bench-seeds-variants-"))
    queries = {"SQL1": seeds.SQL1.format(A="A", B="B", C="C"), "SQL2": seeds.SQL2.format(A="A", B="B", C="C")}

    def run(sql, budget=None, guard=True, checksum=True, force_hash=False, sorted_scan=True):
        saved = dict(register.GUARD_OPTIONS)
        spark.conf.set("spark.colocate.sortedScan", str(sorted_scan).lower())
        if not checksum:
            register.GUARD_OPTIONS["parquet.page.verify-checksum.enabled"] = "false"
        if force_hash:  # neither the query's shape nor the ordered read turns the hash join down
            bucket_join.hash_pays_off = lambda keys, streams: None
        try:
            plan, _ = prepare_join(cat, sql, {t: seeds.QUERY_DAYS for t in "ABC"}, work_dir=work, hash_budget=budget)
            if force_hash:
                plan = replace(plan, bucket_facts=replace(plan.bucket_facts, one_file_per_bucket=False))
            if not guard:
                plan = replace(plan, tables=[replace(t, bucket_guard=False) for t in plan.tables])
            return run_join(spark, plan)
        finally:
            bucket_join.hash_pays_off = hash_pays_off
            register.GUARD_OPTIONS.clear()
            register.GUARD_OPTIONS.update(saved)

    results: dict[str, list[tuple[float, float]]] = {f"{q} {k}": [] for q in queries for k in VARIANTS}
    try:
        for r in range(a.rounds):
            for q, sql in queries.items():
                for name, kw in VARIANTS.items():
                    with contextlib.redirect_stdout(io.StringIO()):  # the join job's own log lines
                        wall, cpu = task_cpu(spark, lambda sql=sql, kw=kw: run(sql, **kw))
                    if r:
                        results[f"{q} {name}"].append((wall, cpu))
            print(f"round {r + 1} done", flush=True)
    finally:
        spark.stop()
        cat.dispose()
    print(f"SQL1 and SQL2 at 1/{a.volume}, colocated, median of rounds 2..{a.rounds}: wall s / task CPU s")
    for name, xs in results.items():
        print(f"{name}: wall {statistics.median(w for w, _ in xs):.2f} cpu {statistics.median(c for _, c in xs):.2f}")


if __name__ == "__main__":
    main()
