"""A job run in the caller's own session (a notebook's ``join_in_session``, ``register``) leaves the
session's settings as it found them, after a success and after a failure: the broadcast threshold a
colocated join turns off, the local-read settings and the job group hold for the job only
(:func:`airflow_colocate.spark.session.scoped`). What stays is what the call is for and is documented
(airflow_colocate/jobs/read.py): one temp view per table read and its backing table in the
``colocate_registered`` database; ``unregister`` takes them away again. Two databases' tables of one
name stay two views; a caller's own temp view is never replaced silently (issue 27)."""

from __future__ import annotations

import pytest

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.read import register, registered, unregister
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.register import DATABASE
from airflow_colocate.spark.session import scoped

pytestmark = pytest.mark.spark

BOTH = {"orders": ["2026-11-01", "2026-11-02"], "lineitem": ["2026-11-01", "2026-11-02"]}
JOIN = "SELECT o.o_orderkey, l.l_linenumber FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey"
BROADCAST = "spark.sql.autoBroadcastJoinThreshold"


def snapshot(spark) -> tuple[dict, dict]:
    sc = spark.sparkContext
    return dict(spark.conf.getAll), {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}


def catalog_state(spark) -> dict:
    """Everything of the session's catalog a call could change: the current database, every
    database with its tables, the temp views with what they read."""
    databases = sorted(d.name for d in spark.catalog.listDatabases())
    return {
        "current": spark.catalog.currentDatabase(),
        "tables": {db: sorted(t.name for t in spark.catalog.listTables(db) if not t.isTemporary) for db in databases},
        "views": {t.name: spark.table(f"`{t.name}`").schema.simpleString()
                  for t in spark.catalog.listTables() if t.isTemporary},
    }


def full(spark) -> tuple:
    return snapshot(spark), catalog_state(spark)


def added(before: dict, after: dict, views: list[str]) -> dict:
    """``before`` with what register is documented to add: the views and their backing tables."""
    out = {"current": before["current"], "tables": dict(before["tables"]), "views": dict(before["views"])}
    out["tables"][DATABASE] = sorted(set(before["tables"].get(DATABASE, [])) | {f"__cl_{v}" for v in views})
    out["views"].update({v: after["views"][v] for v in views})
    return out


@pytest.fixture
def callers_session(spark):
    """The caller's own settings: a broadcast threshold other than the join's -1, a job group."""
    sc = spark.sparkContext
    old = spark.conf.get(BROADCAST)
    spark.conf.set(BROADCAST, "12345")
    sc.setJobGroup("callers-group", "the caller's own jobs")
    yield spark
    sc.setLocalProperty("spark.jobGroup.id", None)
    sc.setLocalProperty("spark.job.description", None)
    spark.conf.set(BROADCAST, old)


def test_join_and_register_in_session_restore_the_session(callers_session, tpch_catalog):
    spark = callers_session
    before = snapshot(spark)
    assert join_in_session(spark, tpch_catalog, JOIN, BOTH)["colocate"]
    assert snapshot(spark) == before
    with pytest.raises(ColocateError, match="failed to plan"):  # fails inside the job, after registering
        join_in_session(spark, tpch_catalog, JOIN.replace("l.l_linenumber", "l.no_such_column"), BOTH)
    assert snapshot(spark) == before
    assert [t.name for t in register(spark, BOTH, catalog=tpch_catalog)] == ["orders", "lineitem"]
    assert snapshot(spark) == before
    with pytest.raises(ColocateError):
        register(spark, {"no_such_table": None}, catalog=tpch_catalog)
    assert snapshot(spark) == before
    assert spark.catalog.tableExists("orders") and spark.catalog.tableExists("lineitem")  # what register is for


def test_a_session_keeps_everything_but_what_is_documented(callers_session, tpch_catalog):
    """Every conf, the job group, the current database, every database's tables and the temp views:
    after register / join_in_session (success or failure) the same plus the documented views and
    their backing tables; after unregister exactly the same."""
    spark = callers_session
    unregister(spark)  # what earlier tests of this run registered
    spark.range(2).createOrReplaceTempView("callers_view")
    try:
        before = full(spark)
        assert DATABASE not in before[1]["tables"]
        register(spark, BOTH, catalog=tpch_catalog)
        after = full(spark)
        assert after[0] == before[0] and after[1] == added(before[1], after[1], ["orders", "lineitem"])
        with pytest.raises(ColocateError, match="failed to plan"):
            join_in_session(spark, tpch_catalog, JOIN.replace("l.l_linenumber", "l.nope"), BOTH)
        assert full(spark) == after
        assert join_in_session(spark, tpch_catalog, JOIN, BOTH)["colocate"]
        assert full(spark) == after
        assert sorted(unregister(spark)) == ["lineitem", "orders"]
        assert full(spark) == before
        with registered(spark, {"orders": ["2026-11-01"]}, catalog=tpch_catalog) as tables:
            assert [t.name for t in tables] == ["orders"] and spark.table("orders").count() > 0
        assert full(spark) == before
    finally:
        spark.catalog.dropTempView("callers_view")


@pytest.fixture(scope="module")
def two_databases(spark, tpch_catalog, tmp_path_factory):
    """``a.orders`` (keys 0..99) and ``b.orders`` (keys 0..49, other values) in the catalog."""
    root = tmp_path_factory.mktemp("two_dbs")
    for db, n in (("a", 100), ("b", 50)):
        src = root / db
        src.mkdir()
        pq.write_table(pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array([f"{db}{i}" for i in range(n)])}),
                       src / "part.parquet")
        tpch_catalog.tables.create(f"{db}.orders", parse_columns("k bigint, v string"), ["k"], bucket_num=2)
        write_in_session(spark, tpch_catalog, f"{db}.orders", "all", Source(format="parquet", path=str(src)),
                         work_dir=root / "runs")
    return tpch_catalog


def test_two_databases_stay_two_views_and_a_callers_view_is_not_replaced(spark, two_databases):
    cat = two_databases
    unregister(spark)
    spark.range(7).createOrReplaceTempView("orders")  # the caller's own view, named like the table
    try:
        tables = register(spark, {"a.orders": None, "b.orders": None}, catalog=cat)
        assert [t.name for t in tables] == ["a_orders", "b_orders"]
        assert spark.table("a_orders").count() == 100 and spark.table("b_orders").count() == 50
        assert spark.sql("SELECT count(*) FROM a_orders JOIN b_orders USING (k)").first()[0] == 50
        assert spark.table("orders").count() == 7  # untouched
        with pytest.raises(ColocateError, match=r"temporary view 'orders' that colocate did not create.*"
                                                r"replace_views=True"):
            register(spark, {"a.orders": None}, catalog=cat)  # alone, a.orders is `orders`: the caller's
        assert spark.table("orders").count() == 7
        assert not spark.catalog.tableExists(f"{DATABASE}.__cl_orders")  # refused before anything was made
        register(spark, {"a.orders": None}, catalog=cat, replace_views=True)
        assert spark.table("orders").count() == 100
        register(spark, {"a.orders": None}, catalog=cat)  # now ours: re-registered without the option
        spark.range(3).createOrReplaceTempView("orders")  # the caller takes the name back
        assert "orders" not in unregister(spark, ["orders"])  # and unregister leaves the caller's view
        assert spark.table("orders").count() == 3
    finally:
        unregister(spark)
        spark.catalog.dropTempView("orders")


def test_scoped_sets_then_restores_or_unsets_on_failure_too(spark):
    sc = spark.sparkContext
    unset, kept = "spark.colocate.test.unset", "spark.colocate.test.kept"
    spark.conf.set(kept, "before")
    try:
        with pytest.raises(RuntimeError), scoped(spark, {unset: "1", kept: None}, job_group=("g", "d")):
            assert spark.conf.get(unset) == "1" and spark.conf.get(kept, None) is None
            assert sc.getLocalProperty("spark.jobGroup.id") == "g"
            sc.setJobDescription("the block's own")
            raise RuntimeError("boom")
        assert spark.conf.get(unset, None) is None and spark.conf.get(kept) == "before"
        assert sc.getLocalProperty("spark.jobGroup.id") is None and sc.getLocalProperty("spark.job.description") is None
    finally:
        spark.conf.unset(kept)


def test_our_own_view_is_ours_whatever_the_case_of_its_name(spark, tpch_catalog):
    """Spark's names are case-insensitive: a view colocate registered as ``orders`` is ours when a
    later read registers a table named ``ORDERS`` (a catalog may hold both names), not refused as if
    the user had made it."""
    from dataclasses import replace

    from airflow_colocate.spark.register import register_tables

    (orders,) = register(spark, {"orders": BOTH["orders"]}, catalog=tpch_catalog)
    try:
        register_tables(spark, [replace(orders, name="ORDERS")])
        assert spark.table("ORDERS").count() == spark.table("orders").count() > 0
        with pytest.raises(ColocateError, match="did not create"):  # a caller's own view still is not ours
            spark.range(1).createOrReplaceTempView("Lineitem")
            register(spark, {"lineitem": BOTH["lineitem"]}, catalog=tpch_catalog)
    finally:
        spark.catalog.dropTempView("Lineitem")
        unregister(spark)
