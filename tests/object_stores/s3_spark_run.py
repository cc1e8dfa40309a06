"""The Spark side on S3 backends, run as its own process (a helper of test_s3_spark.py, not a test).

Why a process of its own: the store's address and key must be in the environment before the JVM
starts, and the session needs hadoop-aws on its classpath from its first moment, as a job a user
submits has them; the suite's shared session has neither. Usage:
``python s3_spark_run.py WORKDIR`` with the S3 server's ``AWS_*`` variables set; prints one JSON
object of findings for the test to assert on.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.backends import add_backend
from airflow_colocate.jobs.balance import Balancer, BalanceOptions
from airflow_colocate.jobs import runners
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.read import register, unregister
from airflow_colocate.jobs.verify import session_runner, verify
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.session import get_spark, scoped
from airflow_colocate.storage import fs, s3

DAYS = ["2026-11-01", "2026-11-02"]
QUERY = ("SELECT a.dt, count(*) AS n, sum(a.k) AS sk, sum(b.w) AS sw, max(a.v) AS mv "
         "FROM {a} a JOIN {b} b ON a.dt = b.dt AND a.k = b.k GROUP BY a.dt ORDER BY a.dt")
REF_QUERY = QUERY.format(a="ref_a", b="ref_b")
QUERY = QUERY.format(a="a", b="b")


def sources(work: Path) -> dict[str, dict[str, str]]:
    """Each table's rows per day as local parquet: the write's source and the reference's."""
    out: dict[str, dict[str, str]] = {"a": {}, "b": {}}
    for i, day in enumerate(DAYS):
        for name, keys in (("a", range(0, 600)), ("b", range(0, 900, 3))):
            d = work / "src" / name / day
            d.mkdir(parents=True)
            ks = [k + i for k in keys]
            cols = {"k": pa.array(ks, pa.int64())}
            if name == "a":
                cols["v"] = pa.array([f"v{k % 97:02d}" for k in ks])
            else:
                cols["w"] = pa.array([k * 7 % 101 for k in ks], pa.int64())
            pq.write_table(pa.table(cols), d / "part.parquet")
            out[name][day] = str(d)
    return out


def main(work: Path) -> dict:
    # one bucket a backend, as teams give each failure domain (account, region, zone) its own: an
    # s3a file system is one bucket's, so a table's partitions and a clone cross file systems
    buckets = {i: f"spark-lake-{work.name}".lower().replace("_", "-")[:50] + f"-be{i}" for i in (1, 2, 3)}
    import boto3

    for bucket in buckets.values():
        boto3.client("s3").create_bucket(Bucket=bucket)
    spark = get_spark("colocate-s3-tests", master="local[2]", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
        "spark.sql.autoBroadcastJoinThreshold": "-1", "spark.task.maxFailures": "1"})
    spark.sparkContext.setLogLevel("ERROR")
    found: dict = {"jars": spark.conf.get("spark.jars", "")}
    cat = Catalog(f"sqlite:///{work / 'catalog.db'}", actor="s3-tests")
    cat.init()
    for i, bucket in buckets.items():
        add_backend(cat, f"s3a://{bucket}/lake", name=f"be{i}")
    src = sources(work)
    cat.tables.create("a", parse_columns("k bigint, v string, dt date"), ["k"], bucket_num=4, replication_num=2,
                      partition_cols=["dt"], colocate_with="g")
    cat.tables.create("b", parse_columns("k bigint, w bigint, dt date"), ["k"], bucket_num=4, replication_num=2,
                      partition_cols=["dt"], colocate_with="g")
    for name in ("a", "b"):
        for day in DAYS:
            write_in_session(spark, cat, name, day, Source(format="parquet", path=src[name][day]), work_dir=work / "runs")
    for name in ("a", "b"):
        views = []
        for day in DAYS:
            views.append(spark.read.parquet(src[name][day]).selectExpr("*", f"DATE'{day}' AS dt"))
        ref = views[0].unionByName(views[1])
        ref.createOrReplaceTempView(f"ref_{name}")
    found["reference"] = [list(map(str, r)) for r in spark.sql(REF_QUERY).collect()]
    tables = {"a": DAYS, "b": DAYS}
    with scoped(spark, {"spark.colocate.join.columnar": "true"}):
        result = join_in_session(spark, cat, QUERY, tables, work_dir=work / "runs")
        found["join_rows"] = [list(map(str, r)) for r in spark.sql(QUERY).collect()]
    found["colocate"] = result["colocate"]
    found["exchanges"] = [j["exchanges_left"] + j["exchanges_right"] for j in result["joins"]]
    found["explain"] = result["explain"]
    unregister(spark, ["a", "b"])
    register(spark, tables, catalog=cat)
    found["registered_rows"] = [list(map(str, r)) for r in spark.sql(QUERY).collect()]
    unregister(spark, ["a", "b"])
    found["verify_bad"] = verify(cat, session_runner(spark), group="g", work_dir=work / "runs")["bad"]

    # a replica object overwritten behind our back: the query reads around it, verify flags it
    _, parts = cat.reads.replicas("default.a")
    victim = parts[0].buckets[1][0]
    (name, size), = [f for f in fs.list_files(victim.path) if f[0].endswith(".parquet")]
    b, key = s3.bucket_key(fs.join(victim.path, name))
    boto3.client("s3").put_object(Bucket=b, Key=key, Body=b"\0" * size)
    found["victim"] = victim.path
    again = join_in_session(spark, cat, QUERY, tables, work_dir=work / "runs")
    found["after_damage_rows"] = [list(map(str, r)) for r in spark.sql(QUERY).collect()]
    found["after_damage_colocate"] = again["colocate"]
    unregister(spark, ["a", "b"])
    found["verify_after_damage"] = [x["path"] for x in verify(cat, session_runner(spark), group="g",
                                                                work_dir=work / "runs")["bad"]]
    found["group_stable"] = cat.health.check_group("g").stable

    # a backend's whole bucket gone: probed down, repaired by copies between the other buckets
    lost = boto3.resource("s3").Bucket(buckets[3])
    lost.objects.all().delete()
    lost.delete()
    found["probe_be3"] = next(r.error for r in probe_backends(cat, timeout=10) if r.backend.name == "be3")
    Balancer(cat, runners.session_runner(spark), BalanceOptions(relocate_now=True, grace=timedelta(0)),
             work_dir=work / "runs").run()
    found["repaired_stable"] = cat.health.check_group("g").stable
    be3 = cat.backends.get("be3").id
    found["be3_in_map"] = any(be3 in ids for ids in cat.groups.get("g").bucket_map)
    repaired = join_in_session(spark, cat, QUERY, tables, work_dir=work / "runs")
    found["after_repair_rows"] = [list(map(str, r)) for r in spark.sql(QUERY).collect()]
    found["after_repair_colocate"] = repaired["colocate"]
    unregister(spark, ["a", "b"])
    found["verify_after_repair"] = verify(cat, session_runner(spark), group="g", work_dir=work / "runs")["bad"]
    spark.stop()
    return found


if __name__ == "__main__":
    print("FINDINGS " + json.dumps(main(Path(sys.argv[1]))))
