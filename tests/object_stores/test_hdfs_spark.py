"""The Spark side on HDFS backends (the MiniDFSCluster): the write job, the colocated join (no
Exchange, plain Spark's rows), ``register()`` with the user's own ``spark.sql``, and ``verify``;
then a replica file deleted and another overwritten behind our back: the join reads around both
with the same rows, the group check flags them, and a balance repairs them. Spark reaches HDFS
with the Hadoop client it bundles: nothing to ship."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.contract import Source
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.read import register, unregister
from airflow_colocate.jobs.verify import session_runner, verify
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.storage import fs

pytestmark = pytest.mark.spark

DAYS = ["2026-11-01", "2026-11-02"]
QUERY = ("SELECT a.dt, count(*) AS n, sum(a.k) AS sk, sum(b.w) AS sw FROM {a} a JOIN {b} b "
         "ON a.dt = b.dt AND a.k = b.k GROUP BY a.dt ORDER BY a.dt")


def test_write_join_register_and_verify_on_hdfs(spark, hdfs_lake, tmp_path):
    lake = hdfs_lake
    cat = lake.catalog
    for name, cols in (("a", "k bigint, v string, dt date"), ("b", "k bigint, w bigint, dt date")):
        cat.tables.create(name, parse_columns(cols), ["k"], bucket_num=4, replication_num=2, partition_cols=["dt"],
                          colocate_with="gh")
    refs = {"a": [], "b": []}
    for i, day in enumerate(DAYS):
        for name, keys in (("a", range(i, 500 + i)), ("b", range(i, 900 + i, 3))):
            src = tmp_path / "src" / name / day
            src.mkdir(parents=True)
            ks = list(keys)
            extra = {"v": pa.array([f"v{k % 13}" for k in ks])} if name == "a" else {"w": pa.array([k % 17 for k in ks], pa.int64())}
            pq.write_table(pa.table({"k": pa.array(ks, pa.int64()), **extra}), src / "p.parquet")
            write_in_session(spark, cat, name, day, Source(format="parquet", path=str(src)), work_dir=tmp_path / "runs")
            refs[name].append(spark.read.parquet(str(src)).selectExpr("*", f"DATE'{day}' AS dt"))
    for name, parts in refs.items():
        parts[0].unionByName(parts[1]).createOrReplaceTempView(f"ref_{name}")
    expected = [tuple(r) for r in spark.sql(QUERY.format(a="ref_a", b="ref_b")).collect()]
    assert len(expected) == 2
    result = join_in_session(spark, cat, QUERY.format(a="a", b="b"), {"a": DAYS, "b": DAYS}, work_dir=tmp_path / "runs")
    assert result["colocate"] and [j["exchanges_left"] + j["exchanges_right"] for j in result["joins"]] == [0]
    assert [tuple(r) for r in spark.sql(QUERY.format(a="a", b="b")).collect()] == expected
    assert "hdfs://" in result["explain"] or result["rows"] == 2
    unregister(spark, ["a", "b"])
    register(spark, {"a": DAYS, "b": DAYS}, catalog=cat)
    assert [tuple(r) for r in spark.sql(QUERY.format(a="a", b="b")).collect()] == expected
    unregister(spark, ["a", "b"])
    assert verify(cat, session_runner(spark), group="gh", work_dir=tmp_path / "runs")["bad"] == []

    # behind our back: one replica's file deleted, another's overwritten with as many zero bytes
    _, parts = cat.reads.replicas("default.a")
    deleted, overwritten = parts[0].buckets[1][0], parts[1].buckets[2][0]
    filesystem, _ = fs._arrow(deleted.path)
    (name, _), = deleted.files
    filesystem.delete_file(fs._arrow(fs.join(deleted.path, name))[1])
    (name, size), = overwritten.files
    with filesystem.open_output_stream(fs._arrow(fs.join(overwritten.path, name))[1]) as out:
        out.write(b"\0" * size)
    result = join_in_session(spark, cat, QUERY.format(a="a", b="b"), {"a": DAYS, "b": DAYS}, work_dir=tmp_path / "runs")
    assert [tuple(r) for r in spark.sql(QUERY.format(a="a", b="b")).collect()] == expected  # read around both
    unregister(spark, ["a", "b"])
    health = cat.health.check_group("gh")
    assert not health.stable, health
    verified = {r.path for p in cat.reads.replicas("default.a")[1] for b in p.buckets for r in b}
    assert not {deleted.path, overwritten.path} & verified, result.get("bad_replicas")  # both marked bad
    hdfs_lake.run()
    assert cat.health.check_group("gh").stable  # the clones' checksums are the catalog's
    register(spark, {"a": DAYS, "b": DAYS}, catalog=cat)
    assert [tuple(r) for r in spark.sql(QUERY.format(a="a", b="b")).collect()] == expected
    unregister(spark, ["a", "b"])
