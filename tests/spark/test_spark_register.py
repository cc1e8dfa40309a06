"""Registered tables: a join on the bucket key plans no Exchange; the fallback does."""

from __future__ import annotations

import time
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import make_plan, read_table

from airflow_colocate.core.contract import ReadPartition, ReadTable, Source
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark.register import register_tables
from airflow_colocate.spark.write_job import run_write

pytestmark = pytest.mark.spark

ORDERS = [["o_key", "bigint"], ["o_total", "double"], ["dt", "date"]]
LINES = [["l_key", "bigint"], ["l_no", "int"], ["l_qty", "int"], ["dt", "date"]]


def physical_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture(scope="module")
def joined(spark, tmp_path_factory):
    """orders and lines written into one group schema (bigint key, 8 buckets), joins not broadcast."""
    tmp = tmp_path_factory.mktemp("join")
    (tmp / "o").mkdir()
    (tmp / "l").mkdir()
    n = 3000
    pq.write_table(
        pa.table({"o_key": pa.array(range(n), pa.int64()), "o_total": pa.array([k * 1.5 for k in range(n)])}),
        tmp / "o" / "o.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "l_key": pa.array([k // 3 for k in range(3 * n)], pa.int64()),
                "l_no": pa.array([k % 3 for k in range(3 * n)], pa.int32()),
                "l_qty": pa.array([k % 17 for k in range(3 * n)], pa.int32()),
            }
        ),
        tmp / "l" / "l.parquet",
    )
    po = make_plan(tmp, source=Source(format="parquet", path=(tmp / "o").as_uri()), columns=ORDERS,
                   dist_cols=["o_key"], table="orders", table_id=1)
    pl = make_plan(tmp, source=Source(format="parquet", path=(tmp / "l").as_uri()), columns=LINES,
                   dist_cols=["l_key"], table="lines", table_id=2)
    ro, rl = run_write(spark, po), run_write(spark, pl)
    saved = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    yield po, ro, pl, rl
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", saved)


JOIN_KEY = "SELECT o.o_key, o.o_total, l.l_no, l.l_qty FROM orders o JOIN lines l ON o.o_key = l.l_key"
JOIN_DT_KEY = (
    "SELECT o.o_key, o.dt, l.l_no FROM orders o JOIN lines l ON o.dt = l.dt AND o.o_key = l.l_key"
)


def test_bucketed_join_has_no_exchange(spark, joined):
    po, ro, pl, rl = joined
    register_tables(spark, [read_table(po, "orders", reports=ro), read_table(pl, "lines", reports=rl)])
    for sql in (JOIN_KEY, JOIN_DT_KEY):
        df = spark.sql(sql)
        text = physical_plan(df)
        assert "Exchange" not in text, text
        assert "SortMergeJoin" in text and "Bucketed: true" in text
    assert spark.sql(JOIN_KEY).count() == 9000
    assert spark.table("orders").columns == ["o_key", "o_total", "dt"]  # __bucket stays hidden


def test_fallback_join_shuffles_and_agrees(spark, joined):
    po, ro, pl, rl = joined
    register_tables(spark, [read_table(po, "orders", reports=ro), read_table(pl, "lines", reports=rl)])
    colocated = spark.sql(JOIN_KEY)
    register_tables(
        spark,
        [read_table(po, "orders", reports=ro, bucketed=False), read_table(pl, "lines", reports=rl, bucketed=False)],
    )
    for sql in (JOIN_KEY, JOIN_DT_KEY):
        assert "Exchange" in physical_plan(spark.sql(sql))
    fallback = sorted(spark.sql(JOIN_KEY).collect())
    assert len(fallback) == 9000
    assert sorted(colocated.collect()) == fallback


def test_register_30_partitions_by_64_buckets(spark, tmp_path):
    """Every (day, bucket) becomes a catalog partition in one statement. How long it takes is a
    benchmark figure (bench/bench_join.py prints it), not a timed test: CI machines are shared."""
    parts = []
    for d in range(30):
        paths = []
        for b in range(64):
            path = tmp_path / f"d{d:02d}" / f"b{b:05d}"
            path.mkdir(parents=True)
            paths.append(path.as_uri())
        parts.append(ReadPartition(value=f"2026-01-{d + 1:02d}", bucket_paths=paths))
    table = ReadTable(
        name="big", columns=[["k", "bigint"], ["v", "string"], ["dt", "date"]], dist_cols=["k"],
        partition_cols=["dt"], bucket_num=64, partitions=parts,
    )
    started = time.perf_counter()
    register_tables(spark, [table])
    seconds = time.perf_counter() - started
    print(f"registered 30 x 64 partitions in {seconds:.2f}s")
    assert spark.sql("SHOW PARTITIONS colocate_registered.`__cl_big`").count() == 30 * 64
    assert spark.table("big").where("dt = DATE'2026-01-07'").count() == 0


def _created(spark, backing: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED colocate_registered.`{backing}`").collect()
    return next(r.data_type for r in rows if r.col_name == "Created Time")


def _view_created(spark, name: str) -> int:
    return spark._jsparkSession.sessionState().catalog().getTempView(name).get().desc().createTime()


def test_a_second_read_of_the_same_replicas_reuses_the_registration(spark, joined):
    """The backing table survives while its replica directories stay the same (no DDL, Spark's
    listing cache kept), and so does the view while its text stays the same; any change, a
    dropped table or a replaced view registers it again."""
    po, ro, pl, rl = joined
    orders = read_table(po, "orders", reports=ro)
    register_tables(spark, [orders])
    created, view_created = _created(spark, "__cl_orders"), _view_created(spark, "orders")
    time.sleep(1.1)  # Created Time has one-second resolution
    register_tables(spark, [orders])
    assert _created(spark, "__cl_orders") == created and _view_created(spark, "orders") == view_created
    assert spark.table("orders").count() == 3000
    register_tables(spark, [replace(orders, hash_build=True)])  # a hint: only the view's text changes
    assert _view_created(spark, "orders") != view_created and _created(spark, "__cl_orders") == created
    register_tables(spark, [orders])

    spark.range(3).createOrReplaceTempView("orders")  # someone else's view of that name: not replaced silently
    with pytest.raises(ColocateError, match="temporary view 'orders' that colocate did not create.*replace_views=True"):
        register_tables(spark, [orders])
    assert spark.table("orders").count() == 3
    register_tables(spark, [orders], replace_views=True)
    assert spark.table("orders").count() == 3000 and _created(spark, "__cl_orders") == created

    register_tables(spark, [read_table(po, "orders", reports=ro, bucketed=False)])  # another layout
    assert _created(spark, "__cl_orders") != created
    created = _created(spark, "__cl_orders")
    spark.sql("DROP TABLE colocate_registered.`__cl_orders`")
    time.sleep(1.1)
    register_tables(spark, [read_table(po, "orders", reports=ro, bucketed=False)])
    assert spark.table("orders").count() == 3000 and _created(spark, "__cl_orders") != created
