"""The seeds' SQL1 and SQL2 while a backend is down, under the two join policies, side by side.

Tables A, B and C of the seeds' experiment (bench_seeds.py's data and queries), written into one
group with replication 2 over three backends; then be2 is marked down and the group checked
(unstable). Each round runs, interleaved and in a rotating order:

* healthy: the same join with every backend alive (the colocated figure, for reference);
* stable: be2 down, join policy ``stable`` (the seeds' and Doris's rule: the join shuffles);
* readable: be2 down, join policy ``readable`` (the join stays bucketed, each bucket read from a
  verified replica on an alive backend).

Every way's count is checked against the others first. Figures: median wall seconds over the
rounds and the median task CPU seconds (Spark's status API).

    .venv/bin/python bench/bench_down_backend.py --volume 10 [--rounds 3] [--buckets 16]
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

from bench_join import task_cpu  # noqa: E402
from bench_seeds import QUERY_DAYS, SCHEMA, SEED_ROWS, SQL1, SQL2, lake_catalog, write_plain  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.core.contract import Source  # noqa: E402
from airflow_colocate.jobs.join import finish_join, prepare_join  # noqa: E402
from airflow_colocate.jobs.write import write_in_session  # noqa: E402
from airflow_colocate.spark.join_job import run_join  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "down_backend"
WAYS = ["healthy", "stable", "readable"]


def generate(spark, root: Path, rows: int, buckets: int) -> None:
    """The three tables as plain parquet, then written into group g_down (replication 2), once per volume."""
    if (root / "_done").exists():  # kept from an earlier run of this volume
        return
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cat = lake_catalog(root)
    for t in "ABC":
        t0 = time.perf_counter()
        write_plain(spark, root / "plain" / t, t, rows)
        cat.tables.create(t, SCHEMA[t], ["id"], bucket_num=buckets, replication_num=2, partition_cols=["dt"],
                          colocate_with="g_down")
        for day in QUERY_DAYS:
            write_in_session(spark, cat, t, day, Source(format="parquet", path=str(root / "plain" / t / f"dt={day}")),
                             work_dir=root / "runs")
        print(f"  {t}: {len(QUERY_DAYS)} partitions written, 2 replicas each ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    cat.dispose()
    (root / "_done").write_text(f"{rows} rows a partition, {buckets} buckets\n")


def run_volume(spark, denominator: int, rounds: int, buckets: int) -> None:
    rows = round(SEED_ROWS / denominator)
    root = DATA / f"v{denominator}_b{buckets}"
    print(f"volume 1/{denominator}: {rows:,} rows a partition x {len(QUERY_DAYS)} days x 3 tables, "
          f"replication 2 over 3 backends ({root})", flush=True)
    generate(spark, root, rows, buckets)
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="bench")
    tables = {t: QUERY_DAYS for t in "ABC"}
    work = Path(tempfile.mkdtemp(prefix="bench-down-"))
    explains: dict[str, str] = {}

    def prepare(sql: str, way: str):
        """The join's plan with be2 down (or not), made outside the timed part: marking a backend
        down and checking the group are the catalog's, not the join's."""
        cat.backends.set_state("be2", "alive" if way == "healthy" else "down", reason="bench")
        cat.health.check_group("g_down")
        planned = prepare_join(cat, sql.format(A="A", B="B", C="C"), tables, work_dir=work,
                               join_policy="readable" if way == "readable" else "stable")
        cat.backends.set_state("be2", "alive", reason="bench")  # between queries the lake is whole again
        return planned

    def run(sql: str, way: str, planned) -> int:
        plan, ticket = planned
        out = finish_join(cat, ticket, run_join(spark, plan))
        explains[f"{'SQL1' if sql == SQL1 else 'SQL2'}/{way}"] = out["explain"]
        return out["rows"]

    counts = {way: run(SQL1, way, prepare(SQL1, way)) for way in WAYS}  # correctness first; the first run compiles
    assert len(set(counts.values())) == 1, counts
    wall = {f"{q}/{w}": [] for q in ("SQL1", "SQL2") for w in WAYS}
    cpu = {k: [] for k in wall}
    for r in range(rounds):
        order = WAYS[r % 3:] + WAYS[:r % 3]
        for qname, sql in (("SQL1", SQL1), ("SQL2", SQL2)):
            for way in order:
                planned = prepare(sql, way)
                w, c = task_cpu(spark, lambda s=sql, w=way, p=planned: run(s, w, p))
                wall[f"{qname}/{way}"].append(w)
                cpu[f"{qname}/{way}"].append(c)
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in wall.items()), flush=True)
    cat.dispose()
    shutil.rmtree(work, ignore_errors=True)
    for q in ("SQL1", "SQL2"):
        colocated = {w: explains[f"{q}/{w}"].count("colocate: true") for w in WAYS}
        print(f"{q} joins colocated per way: {colocated}")
    w = {k: statistics.median(v) for k, v in wall.items()}
    c = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"\n== 1/{denominator}, be2 of 3 down, replication 2, {buckets} buckets, {rounds} rounds (median wall, task CPU)")
    for q in ("SQL1", "SQL2"):
        print(f"{q}: healthy {w[f'{q}/healthy']:.2f} s ({c[f'{q}/healthy']:.2f}), be2 down: stable policy "
              f"{w[f'{q}/stable']:.2f} s ({c[f'{q}/stable']:.2f}), readable policy {w[f'{q}/readable']:.2f} s "
              f"({c[f'{q}/readable']:.2f}) -> readable is x{w[f'{q}/stable'] / w[f'{q}/readable']:.2f} the stable "
              f"policy's wall and {w[f'{q}/readable'] / w[f'{q}/healthy']:.2f}x the healthy join's")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--volume", type=int, default=10, help="1/N of the seeds' 5.7M rows a partition")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    if a.volume < 1 or a.rounds < 1 or a.buckets < 1:
        ap.error("--volume, --rounds and --buckets must be at least 1")
    spark = get_spark("bench-down-backend", master=a.master,
                      conf={"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": str(a.buckets)})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        run_volume(spark, a.volume, a.rounds, a.buckets)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
