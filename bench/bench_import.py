"""Bulk import vs one write per partition, side by side in one run.

    .venv/bin/python bench/bench_import.py [--partitions 100] [--rows 2000] [--buckets 16] [--replication 2] [--master local[2]]

A Hive-style dataset (``dt=…`` folders, one parquet file each) goes into two tables of one shape:
``colocate import`` (``import_in_session``: one Spark job for all partitions, each committed on its
own) and one ``write_in_session`` per partition (plan, Spark job, commit, as a daily load does).
Prints both times, their throughput ratio (target >= 5x), the Spark jobs each launched (counted
through the job group), and checks that every imported partition is committed with exactly the
source's rows (count and an order-independent hash of every row, read back from the replicas).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.core.contract import Source  # noqa: E402
from airflow_colocate.jobs.bulk_import import import_in_session  # noqa: E402
from airflow_colocate.jobs.write import write_in_session  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402

COLUMNS = [("id", "bigint"), ("customer", "bigint"), ("amount", "double"), ("note", "string"), ("dt", "date")]


def days(n: int) -> list[str]:
    from datetime import date, timedelta

    return [(date(2023, 1, 1) + timedelta(days=i)).isoformat() for i in range(n)]


def build(root: Path, values: list[str], rows: int) -> None:
    for i, day in enumerate(values):
        folder = root / f"dt={day}"
        folder.mkdir(parents=True)
        ids = list(range(i * rows, (i + 1) * rows))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "customer": pa.array([k % 1009 for k in ids], pa.int64()),
                                 "amount": pa.array([k * 0.25 for k in ids]), "note": [f"n{k % 777}" for k in ids]}),
                       folder / "part-00000.parquet")


def digest(rows: list[dict]) -> tuple[int, str]:
    """Row count and an order-independent hash of every row."""
    acc = 0
    for r in rows:
        acc ^= int.from_bytes(hashlib.sha256(repr(sorted(r.items())).encode()).digest()[:8], "big")
    return len(rows), f"{acc:016x}"


def check(catalog: Catalog, table: str, root: Path, values: list[str]) -> int:
    """Every partition committed, each replica's bytes as recorded, rows equal to the source."""
    _, parts = catalog.reads.replicas(table, values)
    bad = 0
    for p in parts:
        rows: list[dict] = []
        for bucket in p.buckets:
            for r in bucket:
                d = Path(r.path.removeprefix("file://"))
                assert sum(f.stat().st_size for f in d.iterdir()) == r.bytes, r.path
            d = Path(bucket[0].path.removeprefix("file://"))
            for f in sorted(d.glob("*.parquet")):
                rows += pq.read_table(f).to_pylist()
        if digest(rows) != digest(pq.read_table(root / f"dt={p.value}" / "part-00000.parquet").to_pylist()):
            bad += 1
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rows", type=int, default=2000, help="rows per partition")
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--replication", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    spark = get_spark("bench-import", a.master, {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    sc = spark.sparkContext
    try:
        values = days(a.partitions)
        root = work / "landing"
        build(root, values, a.rows)
        cat = Catalog(f"sqlite:///{work / 'catalog.db'}", actor="bench")
        cat.init()
        for i in range(1, 4):
            (work / f"be{i}").mkdir(parents=True)
            cat.backends.add((work / f"be{i}").as_uri(), name=f"be{i}")
        for name in ("imported", "written"):
            cat.tables.create(name, COLUMNS, ["id"], bucket_num=a.buckets, replication_num=a.replication,
                             partition_cols=["dt"], colocate_with=f"g_{name}")
        # warm-up (JIT, Python workers), not counted: one write into a third table
        cat.tables.create("warm", COLUMNS, ["id"], bucket_num=a.buckets, replication_num=a.replication,
                         partition_cols=["dt"], colocate_with="g_warm")
        write_in_session(spark, cat, "warm", values[0], Source(format="parquet", path=f"file://{root}/dt={values[0]}"),
                         work_dir=work / "runs")

        sc.setJobGroup("import", "import")
        t0 = time.perf_counter()
        summary = import_in_session(spark, cat, "imported", str(root), work_dir=work / "runs", echo=lambda _: None)
        t_import = time.perf_counter() - t0
        jobs_import = len(sc.statusTracker().getJobIdsForGroup("import"))

        sc.setJobGroup("writes", "writes")
        t0 = time.perf_counter()
        for day in values:
            write_in_session(spark, cat, "written", day, Source(format="parquet", path=f"file://{root}/dt={day}"),
                             work_dir=work / "runs")
        t_writes = time.perf_counter() - t0
        jobs_writes = len(sc.statusTracker().getJobIdsForGroup("writes"))
        sc.setLocalProperty("spark.jobGroup.id", None)

        bad = check(cat, "imported", root, values)
        total = a.partitions * a.rows
        print(f"{a.partitions} partitions x {a.rows} rows, {a.buckets} buckets, replication {a.replication}, master {a.master}")
        print(f"colocate import (one Spark application): {t_import:.1f} s, {total / t_import:,.0f} rows/s, "
              f"{jobs_import} Spark jobs; committed {len(summary['committed'])}, failed {len(summary['failed'])}, "
              f"partitions unequal to the source {bad}")
        print(f"{a.partitions} one-partition writes:       {t_writes:.1f} s, {total / t_writes:,.0f} rows/s, "
              f"{jobs_writes} Spark jobs")
        print(f"throughput ratio import / writes: {t_writes / t_import:.1f}x (target >= 5x)")
        cat.dispose()
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
