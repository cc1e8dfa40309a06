"""A split group's join against the same data at one layout (issue 45): the seeds' tables A, B, C
(bench_seeds.py) over ten days, in three groups of one catalog: ``split`` (days 1-5 imported at 8
buckets, the group split by 2, days 6-10 imported at 16), ``at16`` (every day at 16) and ``at8``
(every day at 8). SQL1 and SQL2 over all ten days run colocated in each, interleaved round by
round; printed: median wall seconds, and each way against ``at16``. Every way must return the same
count, and no join may shuffle.

    .venv/bin/python bench/bench_split.py --volume 100 --rounds 5     # 57,000 rows a partition

Why it matters: a split group joins at its map's count (8 tasks, a finer bucket read with its
family), where the data rewritten at 16 buckets joins in 16 tasks; the split's cost is what those
tasks and the sort of a family's several files per partition add, against a rewrite of every
committed file that the split avoids. ``split`` joins as the job chooses, ``split smj`` as a
sort-merge join (hash budget 0); the warm-up round prints each way's join method and bucket reads.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_seeds import DAYS, SCHEMA, SEED_ROWS, write_plain  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.jobs.bulk_import import import_in_session  # noqa: E402
from airflow_colocate.jobs.join import join_in_session  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402

ALL_DAYS = ", ".join(f"DATE'{d}'" for d in DAYS)
SQL1 = ("SELECT count(*) FROM {A} t1 JOIN {B} t5 ON t1.dt = t5.dt AND t1.id = t5.id "
        f"JOIN {{C}} t6 ON t1.dt = t6.dt AND t1.id = t6.id WHERE t1.dt IN ({ALL_DAYS})")
SQL2 = ("SELECT t1.dt, t1.id, t1.name, t1.second_id, t1.second_name, t5.id AS id5, t5.weight_time, t5.list, "
        "t6.ord_id, t6._id FROM {A} t1 JOIN {B} t5 ON t1.dt = t5.dt AND t1.id = t5.id "
        f"JOIN {{C}} t6 ON t1.dt = t6.dt AND t1.id = t6.id WHERE t1.dt IN ({ALL_DAYS}) LIMIT 10000")
WAYS = {"split": 8, "at16": 16, "at8": 8}  # group -> the map's bucket count
# What is run: (way shown, group, session settings, join arguments). "split" joins as the job
# chooses (hash or sort-merge: a family's several files a partition turn the ordered read off, so
# the hash join is chosen where it fits); "split smj" is the sort-merge join (Spark sorts each bucket).
RUNS = [("split", "split", {}, {}), ("split smj", "split", {}, {"hash_budget": 0}), ("at16", "at16", {}, {}),
        ("at8", "at8", {}, {})]


def load(spark, root: Path, rows: int) -> Catalog:
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="bench")
    cat.init()
    for i in range(1, 4):
        (root / "lake" / f"be{i}").mkdir(parents=True)
        cat.backends.add((root / "lake" / f"be{i}").as_uri(), name=f"be{i}")
    for t in "ABC":
        write_plain(spark, root / "plain" / t, t, rows)
    for way, buckets in WAYS.items():
        for t in "ABC":
            cat.tables.create(f"{t}_{way}", SCHEMA[t], ["id"], bucket_num=buckets, replication_num=1,
                              partition_cols=["dt"], colocate_with=f"g_{way}")
        for days in (DAYS[:5], DAYS[5:]):
            if way == "split" and days[0] == DAYS[5]:
                cat.groups.split("g_split", 2)
            for t in "ABC":
                import_in_session(spark, cat, f"{t}_{way}", str(root / "plain" / t), partitions=days,
                                  work_dir=root / "runs", echo=lambda _: None)
        print(f"  {way}: loaded, layouts {cat.groups.layouts(f'g_{way}')}", flush=True)
    return cat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--volume", type=int, default=100, help="1/N of the seeds' 5.7 million rows a partition")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    rows = round(SEED_ROWS / a.volume)
    root = Path(tempfile.mkdtemp(prefix="bench-split-"))
    spark = get_spark("bench-split", "local[2]", {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                                         "spark.sql.shuffle.partitions": "16"})
    spark.sparkContext.setLogLevel("ERROR")
    print(f"Spark {spark.version}, local[2]; {rows:,} rows a partition x 10 days x 3 tables; {a.rounds} rounds; "
          f"SQL1/SQL2 over all 10 days ({root})", flush=True)
    try:
        cat = load(spark, root, rows)
        ways = [w for w, *_ in RUNS]
        wall: dict[str, list[float]] = {f"{q}/{w}": [] for q in ("SQL1", "SQL2") for w in ways}
        counts = {}
        for r in range(a.rounds + 1):  # round 0 warms up and checks
            for qname, sql in (("SQL1", SQL1), ("SQL2", SQL2)):
                for way, group, conf, kwargs in RUNS:
                    names = {t: f"{t}_{group}" for t in "ABC"}
                    for k, v in conf.items():
                        spark.conf.set(k, v)
                    try:
                        t0 = time.perf_counter()
                        result = join_in_session(spark, cat, sql.format(**names), {n: DAYS for n in names.values()},
                                                 work_dir=root / "runs", **kwargs)
                        took = time.perf_counter() - t0
                    finally:
                        for k in conf:
                            spark.conf.unset(k)
                    assert all(j["colocate"] for j in result["joins"]), (way, result["joins"])
                    if r == 0:
                        if qname == "SQL1":
                            counts[way] = spark.sql(sql.format(**names)).collect()[0][0]
                        reads = [line for line in result["explain"].splitlines() if line.startswith("bucket reads:")]
                        print(f"  {qname} {way}: {(result['bucket_join'] or {}).get('method')} join; "
                              f"{reads[0] if reads else 'no bucket reads line'}", flush=True)
                        continue
                    wall[f"{qname}/{way}"].append(took)
        assert len(set(counts.values())) == 1, counts
        print(f"SQL1 count {counts['at16']:,} in every way; no join shuffled")
        for q in ("SQL1", "SQL2"):
            base = statistics.median(wall[f"{q}/at16"])
            print(f"{q}: " + "; ".join(f"{w} {statistics.median(wall[f'{q}/{w}']):.2f} s "
                                       f"(x{statistics.median(wall[f'{q}/{w}']) / base:.2f} at16)" for w in ways))
        cat.dispose()
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
