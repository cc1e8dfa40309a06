"""The peer a Spark team would pick instead of a colocation group: Iceberg tables partitioned by
``(dt, bucket(N, id))`` joined with Spark's storage-partitioned join (SPJ), as a way of
``bench_seeds.py --iceberg``.

Iceberg's Spark runtime is a Maven Central jar per Spark line; the newest line it was published for
when this was written is 4.1, so the comparison runs with ``--spark-line 4.1``. The jar is fetched
once into the local Maven repository (``mvn dependency:get``, pinned below).

SPJ only engages when both sides report the same key-grouped partitioning and Spark is allowed to
use it, so every switch that helps is set (``SPJ_CONF``) and each query's executed plan is searched
for an ``Exchange``: a plan that still shuffles is printed, so a reader sees why and not a ratio.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

ICEBERG = "1.11.0"
RUNTIME = f"org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:{ICEBERG}"
CATALOG = "ice"
SPJ_CONF = {
    "spark.sql.sources.v2.bucketing.enabled": "true",
    "spark.sql.sources.v2.bucketing.pushPartValues.enabled": "true",
    "spark.sql.sources.v2.bucketing.partiallyClusteredDistribution.enabled": "false",  # no skew here: whole groups
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.sources.v2.bucketing.allowJoinKeysSubsetOfPartitionKeys.enabled": "true",
    "spark.sql.iceberg.planning.preserve-data-grouping": "true",
}


def runtime_jar() -> Path:
    """The pinned runtime in ~/.m2, fetched from Maven Central the first time."""
    group, artifact, version = RUNTIME.split(":")
    jar = Path.home() / ".m2" / "repository" / Path(*group.split(".")) / artifact / version / f"{artifact}-{version}.jar"
    if not jar.exists():
        subprocess.run(["mvn", "-q", "dependency:get", f"-Dartifact={RUNTIME}", "-Dtransitive=false"], check=True)
    return jar


def session_conf(warehouse: Path) -> dict[str, str]:
    """A Hadoop catalog ``ice`` over local folders (no metastore to start), and SPJ on."""
    return {"spark.jars": str(runtime_jar()),
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{CATALOG}.type": "hadoop",
            f"spark.sql.catalog.{CATALOG}.warehouse": warehouse.as_uri(), **SPJ_CONF}


def names(denominator: int, buckets: int) -> dict[str, str]:
    """One namespace per volume and bucket count, as the plain data has one folder each."""
    return {t: f"{CATALOG}.seeds_v{denominator}_b{buckets}.{t}" for t in "ABC"}


def ensure_tables(spark, root: Path, names: dict[str, str], schema: dict[str, list[tuple[str, str]]],
                  buckets: int) -> None:
    """The seeds' tables as Iceberg tables from the same plain parquet, once per volume: each
    partition's rows sorted by id within its bucket, as the colocated and bucketBy writes do."""
    done = root / "_iceberg_done"
    if done.exists():
        return
    t0 = time.perf_counter()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {names['A'].rsplit('.', 1)[0]}")
    for t, cols in schema.items():
        spark.sql(f"DROP TABLE IF EXISTS {names[t]} PURGE")
        columns = ", ".join(f"`{n}` {ty}" for n, ty in cols)
        spark.sql(f"CREATE TABLE {names[t]} ({columns}) USING iceberg PARTITIONED BY (dt, bucket({buckets}, id))")
        # rows hashed by partition (dt, bucket) onto tasks and sorted by id inside each task: one
        # file a (day, bucket) ordered by id. ``WRITE ORDERED BY id`` asked for a global order,
        # i.e. a range distribution: one more pass to sample the keys, and a (day, bucket) whose
        # rows straddled two ranges was cut into two files.
        spark.sql(f"ALTER TABLE {names[t]} WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY id")
        spark.read.parquet(str(root / "plain" / t)).select(*[n for n, _ in cols]).writeTo(names[t]).append()
        print(f"  {t}: Iceberg table written ({time.perf_counter() - t0:.0f} s)", flush=True)
    done.write_text(f"Iceberg {ICEBERG}, {buckets} buckets\n")


def check(spark, names: dict[str, dict[str, str]], sql1: str, sql2: str, colocated: dict) -> None:
    """Each way's Exchange count under SQL1 and SQL2 (the colocated one from its explain), SPJ's
    plan printed when it still shuffles, and SQL2's rows without its LIMIT compared between
    Iceberg and the plain shuffle join (an order-free checksum: count and sum of row hashes)."""
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    for q, sql in (("SQL1", sql1), ("SQL2", sql2)):
        counts = {}
        for way in ("iceberg", "bucketBy", "shuffle"):
            df = spark.sql(sql.format(**names[way]))
            df.collect()
            counts[way] = exchanges(df)
            if way == "iceberg" and counts[way]:  # the final plan only: the initial one repeats it
                print(f"{q} on Iceberg still shuffles ({counts[way]} Exchange): SPJ did not engage; plan:\n{executed(df)}")
        ours = re.findall(r"exchanges: (\d+) left, (\d+) right", colocated.get(sql, {}).get("explain", ""))
        colocated_count = sum(int(a) + int(b) for a, b in ours) if ours else "?"
        print(f"{q} Exchange nodes: colocated {colocated_count}, " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    whole = sql2.rsplit(" LIMIT ", 1)[0]
    digest = "SELECT count(*), sum(hash(*)) FROM ({q})"
    got = {way: tuple(spark.sql(digest.format(q=whole.format(**names[way]))).collect()[0]) for way in ("iceberg", "shuffle")}
    assert got["iceberg"] == got["shuffle"], got
    print(f"SQL2 without LIMIT: {got['iceberg'][0]:,} rows, the same rows on Iceberg and in the plain shuffle join")


def exchanges(df) -> int:
    """Exchange nodes that move rows between tasks by key in a query's executed plan (adaptive
    execution's final plan once it ran): a ``SinglePartition`` one gathers a count's partial sums
    above the joins and is in every way's plan alike."""
    return len(re.findall(r"\bExchange (?!SinglePartition)", executed(df)))


def executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def daily_write(spark, root: Path, name: str, table: str, cols: list[tuple[str, str]], day: str, source_day: str) -> float:
    """Seconds to append one day's partition (the rows of ``source_day``) to the Iceberg table; the
    day is deleted again (a metadata delete: whole partitions), so the volume's data is unchanged."""
    names = ", ".join(n for n, _ in cols if n != "dt")
    src = root / "plain" / table / f"dt={source_day}"
    t0 = time.perf_counter()
    spark.sql(f"INSERT INTO {name} SELECT {names}, DATE'{day}' AS dt FROM parquet.`{src}`")
    took = time.perf_counter() - t0
    spark.sql(f"DELETE FROM {name} WHERE dt = DATE'{day}'")
    return took
