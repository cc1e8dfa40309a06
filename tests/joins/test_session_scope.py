"""A job run in the caller's own session (a notebook's ``join_in_session``, ``register``) leaves the
session's settings as it found them, after a success and after a failure: the broadcast threshold a
colocated join turns off, the local-read settings and the job group hold for the job only
(:func:`airflow_colocate.spark.session.scoped`). What stays is what the call is for: the registered
tables and views."""

from __future__ import annotations

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.read import register
from airflow_colocate.spark.session import scoped

pytestmark = pytest.mark.spark

BOTH = {"orders": ["2026-11-01", "2026-11-02"], "lineitem": ["2026-11-01", "2026-11-02"]}
JOIN = "SELECT o.o_orderkey, l.l_linenumber FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey"
BROADCAST = "spark.sql.autoBroadcastJoinThreshold"


def snapshot(spark) -> tuple[dict, dict]:
    sc = spark.sparkContext
    return dict(spark.conf.getAll), {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}


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
