"""What publishing a colocated table as an Iceberg table costs: the first publication of a table's
history, and a daily write's commit with its table published against the same commit without.

A lake of DAYS daily partitions x BUCKETS buckets x 2 replicas in local folders, written with the
write job's contract through pyarrow (tests/balance/balance_lake.py), SQLite catalog; the Iceberg
catalog on the same database. Prints medians of --rounds writes each way.

    .venv/bin/python bench/bench_iceberg_publish.py [--days 90] [--buckets 16] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "balance")]

from balance_lake import Clock, Lake  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.jobs.tables import TableChange, alter_table  # noqa: E402


def lake_of(root: Path, days: int, buckets: int) -> Lake:
    clock = Clock()
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="bench", clock=clock)
    cat.init()
    lake = Lake(cat, clock, root)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    for table in ("published", "plain"):
        lake.create(table, buckets=buckets, replicas=2)
        for d in range(days):
            lake.write(table, f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}", range(d * 1000, d * 1000 + 500))
    return lake


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        lake = lake_of(root, args.days, args.buckets)
        print(f"lake: {args.days} days x {args.buckets} buckets x 2 replicas, two tables, "
              f"{time.perf_counter() - t0:.1f} s to write")
        t0 = time.perf_counter()
        alter_table(lake.catalog, "published", TableChange(iceberg=True, iceberg_warehouse=(root / "wh").as_uri()))
        files = args.days * args.buckets
        print(f"first publication of the history ({files} files): {time.perf_counter() - t0:.2f} s")
        timings = {"published": [], "plain": []}
        for r in range(args.rounds):
            day = f"2027-01-{1 + r:02d}"
            for table in ("plain", "published"):  # interleaved: both see the same machine
                t0 = time.perf_counter()
                lake.write(table, day, range(r * 1000, r * 1000 + 500))
                timings[table].append(time.perf_counter() - t0)
        plain, published = statistics.median(timings["plain"]), statistics.median(timings["published"])
        print(f"a daily write, median of {args.rounds}: {plain * 1000:.0f} ms unpublished, {published * 1000:.0f} ms "
              f"published (+{(published - plain) * 1000:.0f} ms for the Iceberg snapshot)")
        pub = lake.catalog.iceberg.get("published")
        assert pub.lag_reason is None, pub.lag_reason
        lake.catalog.dispose()


if __name__ == "__main__":
    main()
