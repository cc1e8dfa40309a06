"""What proving a replica's bytes costs a registered read: the first read of a table through
``register()`` + ``spark.sql`` with the jar's replica file system, with
``colocate.replica.verify-checksums`` on (each replica's files hashed against the catalog's
checksum before a task's first read of it, once per executor) and off (names and sizes only).

Each round writes two identical fresh tables (so both reads are first reads, with the same page
cache), reads one with the setting on and the other off, in alternating order, and checks their
answers agree. A later read of the same replicas in the same executor is not hashed again, so the
figure is the worst case: a job's first look at each replica.

    .venv/bin/python bench/bench_verify_read.py [--rows 4000000] [--rounds 3] [--buckets 8]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.jobs.backends import add_backend
from airflow_colocate.jobs.read import register, unregister
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.session import get_spark

KEY = "colocate.replica.verify-checksums"
SQL = "SELECT count(*), sum(id), max(v), sum(x) FROM {t}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--buckets", type=int, default=8)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="colocate-bench-verify-"))
    spark = get_spark("bench-verify", master="local[2,3]", conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="bench")
        cat.init()
        for name in ("be1", "be2"):
            (root / name).mkdir()
            add_backend(cat, (root / name).as_uri(), name=name)
        src = root / "src"
        spark.range(args.rows).selectExpr("id", "concat('value-', id, '-', id * 7) AS v", "CAST(id * 0.5 AS DOUBLE) AS x") \
            .write.parquet(str(src))
        mb = sum(f.stat().st_size for f in src.glob("*.parquet")) / 1e6
        took: dict[str, list[float]] = {"on": [], "off": []}
        for r in range(args.rounds):
            answers = {}
            for way in (("on", "off") if r % 2 == 0 else ("off", "on")):
                t = f"t{r}_{way}"
                cat.tables.create(t, [("id", "bigint"), ("v", "string"), ("x", "double"), ("dt", "date")], ["id"],
                                  bucket_num=args.buckets, replication_num=2, partition_cols=["dt"])
                write_in_session(spark, cat, t, "2026-11-01", Source(format="parquet", path=str(src)), work_dir=root / "runs")
            for way in (("on", "off") if r % 2 == 0 else ("off", "on")):
                t = f"t{r}_{way}"
                spark.conf.set(KEY, "true" if way == "on" else "false")
                register(spark, {t: None}, catalog=cat)
                started = time.perf_counter()
                answers[way] = spark.sql(SQL.format(t=t)).collect()
                took[way].append(time.perf_counter() - started)
                unregister(spark, [t])
            assert answers["on"] == answers["off"], answers
        on, off = statistics.median(took["on"]), statistics.median(took["off"])
        print(f"{args.rows:,} rows ({mb:.0f} MB of parquet, {args.buckets} buckets, replication 2), "
              f"first read, median of {args.rounds}: verify on {on:.2f} s, off {off:.2f} s: x{on / off:.2f}")
    finally:
        spark.conf.unset(KEY)
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
