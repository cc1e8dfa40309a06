"""Property test of the columnar bucket merge join (issue 32): on random inputs with null keys,
duplicate keys on both sides and one hot key, written as colocated buckets (each (day, bucket) one
file sorted by the key), it returns the rows Spark's own sort-merge join returns over the same
registered tables, for every join type it takes and every key type it merges on. The scan's
batches are three rows and the operator's two, so runs cross batch boundaries and output batches
fill in the middle of a key's rows. Every other lake has three buckets, not four: the vector guard
takes pmod as a mask for a power of two and divides otherwise, and both must hash as Spark does."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_colocate.core.contract import ReadPartition, ReadTable
from airflow_colocate.spark.register import register_tables, unregister_tables
from airflow_colocate.spark.session import scoped

pytestmark = pytest.mark.spark

DAYS = ["2026-11-01", "2026-11-02"]
BUCKETS = 4
NODE = "ColocateColumnarMergeJoin"
KINDS = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN"}
# a few values per type, so keys repeat; Spark's types as the table DDL names them
KEYS = {
    "int": [-7, 0, 3, 2**31 - 1],
    "bigint": [-(2**62), -1, 0, 10**12],
    "date": [dt.date(1970, 1, 1), dt.date(2026, 2, 28), dt.date(2026, 3, 1)],
    "timestamp": [dt.datetime(2026, 1, 1, 0, 0, 0), dt.datetime(2026, 1, 1, 0, 0, 1), dt.datetime(1999, 12, 31, 23, 59)],
    "string": ["", "a", "ab", "b", "é", "zz"],
    "decimal(10,2)": [Decimal("-1.50"), Decimal("0.00"), Decimal("12345678.99")],
    "decimal(30,4)": [Decimal("-12345678901234567890.1234"), Decimal("0.0001"), Decimal("5.0000")],
}
SMALL_BATCHES = {"spark.sql.parquet.columnarReaderBatchSize": "3", "spark.colocate.join.columnar.batchRows": "2",
                 "spark.sql.autoBroadcastJoinThreshold": "-1"}


def side(key_type: str):
    """Rows (key, value, day): keys from the type's few values or null, plus one hot key repeated."""
    key = st.one_of(st.none(), st.sampled_from(KEYS[key_type]))
    rows = st.lists(st.tuples(key, st.integers(0, 20), st.sampled_from(DAYS)), max_size=25)
    hot = st.tuples(st.sampled_from(KEYS[key_type]), st.integers(0, 12), st.sampled_from(DAYS))
    return st.tuples(rows, hot).map(lambda t: t[0] + [(t[1][0], i, t[1][2]) for i in range(t[1][1])])


def write_table(spark, root, name: str, key_type: str, rows, buckets: int = BUCKETS) -> ReadTable:
    """``rows`` as a colocated table: one parquet file per (day, bucket), sorted by the key."""
    df = spark.createDataFrame([(k, v, dt.date.fromisoformat(d)) for k, v, d in rows], f"k {key_type}, v bigint, dt date")
    path = root / name
    (df.selectExpr("*", f"pmod(hash(k), {buckets}) AS __bucket").repartition("dt", "__bucket")
       .sortWithinPartitions("k").write.partitionBy("dt", "__bucket").parquet(str(path)))
    parts = []
    for day in DAYS:
        dirs = [path / f"dt={day}" / f"__bucket={b}" for b in range(buckets)]
        parts.append(ReadPartition(value=day, bucket_paths=[d.as_uri() if d.exists() else "" for d in dirs]))
    return ReadTable(name=name, columns=[["k", key_type], ["v", "bigint"], ["dt", "date"]], dist_cols=["k"],
                     partition_cols=["dt"], bucket_num=buckets, partitions=parts)


def query(kind: str, condition: bool) -> str:
    cols = "x.dt, x.k, x.v" + ("" if kind in ("semi", "anti") else ", y.k AS yk, y.v AS yv")
    extra = " AND x.v + y.v > 12" if condition else ""
    return f"SELECT {cols} FROM px x {KINDS[kind]} py y ON x.dt = y.dt AND x.k = y.k{extra}"


@pytest.fixture(scope="module")
def counter():
    return itertools.count()


@pytest.mark.parametrize("key_type", list(KEYS))
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_same_rows_as_spark_merge_join(spark, tmp_path_factory, counter, key_type, data):
    left, right = data.draw(side(key_type), "left"), data.draw(side(key_type), "right")
    condition = data.draw(st.booleans(), "condition")
    n = next(counter)
    root = tmp_path_factory.mktemp(f"prop{n}")
    buckets = (BUCKETS, 3)[n % 2]
    tables = [write_table(spark, root, "px", key_type, left, buckets),
              write_table(spark, root, "py", key_type, right, buckets)]
    register_tables(spark, tables, replace_views=True)
    try:
        for kind in KINDS:
            sql = query(kind, condition)
            with scoped(spark, {**SMALL_BATCHES, "spark.colocate.join.columnar": "false"}):
                expected = sorted(map(tuple, spark.sql(sql).collect()), key=repr)
            with scoped(spark, {**SMALL_BATCHES, "spark.colocate.join.columnar": "true"}):
                df = spark.sql(sql)
                got = sorted(map(tuple, df.collect()), key=repr)
                plan = df._jdf.queryExecution().executedPlan().toString()
            assert got == expected, (kind, sql, left, right)
            if left and right:  # an empty table reads no partition: Spark plans no bucketed join then
                assert NODE in plan, plan
    finally:
        unregister_tables(spark, ["px", "py"])
    assert spark._jvm.colocate.ordered.BucketGuard.disagreements() == 0  # the vector guard hashes as Spark does
