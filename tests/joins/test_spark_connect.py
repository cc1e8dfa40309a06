"""register() and the in-session join through a real Spark Connect server (issue 27): no JVM on the
client, the replicas checked on the cluster, the same rows as plain Spark, ``colocate: true``."""

from __future__ import annotations

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.read import register, unregister
from airflow_colocate.spark.connect import is_connect
from airflow_colocate.spark.physical_plan import joins_of

pytestmark = pytest.mark.spark

BOTH = {"orders": ["2026-11-01", "2026-11-02"], "lineitem": ["2026-11-01", "2026-11-02"]}
JOIN = ("SELECT o.dt, o.o_orderpriority, count(*) AS n, sum(l.l_extendedprice) AS revenue "
        "FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.dt, o.o_orderpriority")


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_register_and_join_through_spark_connect(connect_spark, spark, plain, tpch_catalog):
    remote = connect_spark
    assert is_connect(remote) and not is_connect(spark)
    registered = register(remote, BOTH, catalog=tpch_catalog)
    assert [t.name for t in registered] == ["orders", "lineitem"]
    expected = rows(spark.sql(JOIN.format(o="ref_orders", l="ref_lineitem")))
    df = remote.sql(JOIN.format(o="orders", l="lineitem"))
    assert rows(df) == expected
    [join] = joins_of(df)  # read from the explain text: no JVM on this side
    assert join.left.exchanges == 0 and join.right.exchanges == 0
    assert {join.left.tables[0], join.right.tables[0]} == {"orders", "lineitem"}
    assert ("orders", "o_orderkey") in [k[0] for k in join.keys] + [k[1] for k in join.keys]

    out = join_in_session(remote, tpch_catalog, JOIN.format(o="orders", l="lineitem"), BOTH)
    assert out["colocate"] and "colocate: true" in out["explain"]
    assert out["rows"] == len(expected)
    assert "order not shown to a Spark Connect client" in out["explain"]
    assert out["locality"]["note"]  # says why locality is not measured here

    # the fallback shuffles, and the explain read from text says so
    fallback = join_in_session(remote, tpch_catalog, JOIN.format(o="orders", l="lineitem"), BOTH,
                               disable_colocate_join=True)
    assert not fallback["colocate"] and fallback["rows"] == len(expected)

    with pytest.raises(ColocateError, match="needs a classic Spark session"):
        join_in_session(remote, tpch_catalog, "SELECT c_custkey, c_name, c_mktsegment FROM customer",
                        {"customer": None}, output_table="customer")
    assert sorted(unregister(remote)) == ["lineitem", "orders"]  # the refused join registered nothing
    assert not remote.catalog.databaseExists("colocate_registered")


def test_a_replica_the_cluster_finds_wrong_is_read_around(connect_spark, tpch_catalog, tmp_path):
    """The check runs on the cluster (binaryFile listing): a stray file in the first replica of a
    bucket sends the read to the second, and the catalog marks the first bad."""
    from airflow_colocate.jobs.read import read_plans

    plans = read_plans(tpch_catalog, {"notes": ["2026-11-01"]}).tables
    first = plans[0].partitions[0].candidates[0][0]
    stray = first.path.removeprefix("file://") + "/part-stray.parquet"
    with open(stray, "wb") as f:
        f.write(b"not parquet")
    try:
        [notes] = register(connect_spark, {"notes": ["2026-11-01"]}, catalog=tpch_catalog)
        assert notes.partitions[0].bucket_paths[0] != first.path
        assert connect_spark.table("notes").count() > 0
    finally:
        import os

        os.remove(stray)
