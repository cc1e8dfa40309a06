"""Colocated joins return exactly what plain Spark returns, with zero Exchange under a join exactly
when the planner said colocate: true; otherwise the fallback names its reason."""

from __future__ import annotations

import re

import pytest

from airflow_colocate.core.errors import ColocateError, PlacementError
from airflow_colocate.jobs.join import join_in_session

pytestmark = pytest.mark.spark

TWO_DAYS = ["2026-11-01", "2026-11-02"]
BOTH = {"orders": TWO_DAYS, "lineitem": TWO_DAYS}


def same_rows(spark, ours: str, reference: str, tables, catalog, **kw) -> dict:
    """Run ``ours`` as a colocate join and ``reference`` on plain views; compare as multisets."""
    result = join_in_session(spark, catalog, ours, tables, **kw)
    mine = spark.sql(ours)
    ref = spark.sql(reference)
    assert mine.count() == ref.count() == result["rows"]
    assert mine.exceptAll(ref).count() == 0 and ref.exceptAll(mine).count() == 0
    for j in result["joins"]:  # the planner's prediction is what Spark did, join by join
        assert j["planned"] == (j["exchanges_left"] + j["exchanges_right"] == 0) == j["colocate"], j
    return result


def exchanges(result) -> list[int]:
    return [j["exchanges_left"] + j["exchanges_right"] for j in result["joins"]]


JOIN_TYPES = {
    "inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN",
    "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN",
}


@pytest.mark.parametrize("kind", list(JOIN_TYPES))
def test_two_table_join_types_on_dt_and_key(spark, tpch_catalog, plain, kind):
    cols = "o.dt, o.o_orderkey, o.o_totalprice" + ("" if kind in ("semi", "anti") else ", l.l_linenumber, l.l_quantity")
    q = (f"SELECT {cols} FROM {{o}} o {JOIN_TYPES[kind]} {{l}} l "
         f"ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey AND l.l_quantity > 25")
    result = same_rows(spark, q.format(o="orders", l="lineitem"), q.format(o="ref_orders", l="ref_lineitem"), BOTH, tpch_catalog)
    assert result["colocate"] is True and exchanges(result) == [0]
    assert "colocate: true" in result["explain"]


def test_three_table_join_in_one_group(spark, tpch_catalog, plain):
    q = ("SELECT o.o_orderpriority, count(*) AS n, sum(l.l_extendedprice) AS revenue FROM {o} o "
         "JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey "
         "JOIN {n} n ON n.dt = o.dt AND n.n_orderkey = o.o_orderkey GROUP BY o.o_orderpriority")
    result = same_rows(spark, q.format(o="orders", l="lineitem", n="notes"),
                       q.format(o="ref_orders", l="ref_lineitem", n="ref_notes"),
                       {"orders": TWO_DAYS, "lineitem": TWO_DAYS, "notes": TWO_DAYS}, tpch_catalog)
    assert len(result["joins"]) == 2 and exchanges(result) == [0, 0] and result["colocate"]


def test_colocated_table_with_a_plain_one_shuffles_only_the_plain_side(spark, tpch_catalog, plain):
    q = "SELECT o.o_orderkey, f.f_flag FROM {o} o JOIN {f} f ON o.dt = f.dt AND o.o_orderkey = f.f_orderkey"
    result = same_rows(spark, q.format(o="orders", f="flags"), q.format(o="ref_orders", f="ref_flags"),
                       {"orders": TWO_DAYS, "flags": TWO_DAYS}, tpch_catalog)
    (j,) = result["joins"]
    assert not j["colocate"] and j["reason"] == "table is not colocated"
    sides = {tuple(j["left"]): j["exchanges_left"], tuple(j["right"]): j["exchanges_right"]}
    assert sides[("orders",)] == 0 and sides[("flags",)] >= 1


def test_join_on_a_non_bucket_key_falls_back(spark, tpch_catalog, plain):
    q = "SELECT o.o_orderkey, l.l_orderkey FROM {o} o JOIN {l} l ON o.o_custkey = l.l_linenumber AND o.dt = l.dt"
    result = same_rows(spark, q.format(o="orders", l="lineitem"), q.format(o="ref_orders", l="ref_lineitem"), BOTH, tpch_catalog)
    (j,) = result["joins"]
    assert not j["colocate"] and j["reason"] == "join keys do not cover the distribution columns"
    assert j["exchanges_left"] >= 1 and j["exchanges_right"] >= 1


def test_one_partition_of_several(spark, tpch_catalog, plain):
    q = ("SELECT o.o_orderkey, l.l_linenumber FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey"
         " WHERE o.dt = DATE'2026-11-02'")
    one = {"orders": ["2026-11-02"], "lineitem": ["2026-11-02"]}
    result = same_rows(spark, q.format(o="orders", l="lineitem"), q.format(o="ref_orders", l="ref_lineitem"), one, tpch_catalog)
    assert result["colocate"] and result["rows"] > 0


def test_unstable_group_and_down_backend_fall_back_with_reason(spark, tpch_catalog, plain):
    q = "SELECT o.o_orderkey, l.l_linenumber FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey"
    ours, ref = q.format(o="orders", l="lineitem"), q.format(o="ref_orders", l="ref_lineitem")
    tpch_catalog.groups.set_stable("g_tpch", False, reason="maintenance")
    try:
        result = same_rows(spark, ours, ref, BOTH, tpch_catalog)
        assert not result["colocate"] and "colocate: false, reason: group is not stable: maintenance" in result["explain"]
        assert all(e >= 2 for e in exchanges(result))
        with pytest.raises(ColocateError, match="require_colocate"):
            join_in_session(spark, tpch_catalog, ours, BOTH, require_colocate=True)
    finally:
        tpch_catalog.groups.set_stable("g_tpch", True)
    tpch_catalog.backends.set_state("be2", "down")
    try:
        result = same_rows(spark, ours, ref, BOTH, tpch_catalog)
        assert not result["colocate"] and "group is not stable" in result["joins"][0]["reason"]
    finally:
        tpch_catalog.backends.set_state("be2", "alive")
    result = same_rows(spark, ours, ref, BOTH, tpch_catalog, disable_colocate_join=True)
    assert result["joins"][0]["reason"] == "colocate join is disabled"
    tpch_catalog.set_flag("disable_colocate_join", True)  # the global flag, as an operator sets it
    try:
        result = same_rows(spark, ours, ref, BOTH, tpch_catalog)
        assert not result["colocate"] and result["joins"][0]["reason"] == "colocate join is disabled"
        assert all(e >= 2 for e in exchanges(result))
    finally:
        tpch_catalog.set_flag("disable_colocate_join", False)
    assert join_in_session(spark, tpch_catalog, ours, BOTH, require_colocate=True)["colocate"]


def test_output_into_the_group_is_colocated_next_time(spark, tpch_catalog, plain):
    from airflow_colocate.core.sqltypes import parse_columns

    tpch_catalog.tables.create("order_revenue", parse_columns("r_orderkey bigint, revenue decimal(25,2), dt date"),
                              ["r_orderkey"], bucket_num=8, replication_num=2, partition_cols=["dt"],
                              colocate_with="g_tpch", if_not_exists=True)
    q = ("SELECT l.l_orderkey AS r_orderkey, sum(l.l_extendedprice) AS revenue, l.dt FROM lineitem l "
         "WHERE l.dt = DATE'2026-11-01' GROUP BY l.l_orderkey, l.dt")
    out = join_in_session(spark, tpch_catalog, q, {"lineitem": ["2026-11-01"]}, output_table="order_revenue",
                          output_partition="2026-11-01")
    assert out["output"]["rows"] == out["rows"] > 0
    q2 = ("SELECT o.o_orderkey, r.revenue FROM {o} o JOIN {r} r ON o.dt = r.dt AND o.o_orderkey = r.r_orderkey")
    ref_rev = ("(SELECT l_orderkey AS r_orderkey, sum(l_extendedprice) AS revenue, dt FROM ref_lineitem "
               "WHERE dt = DATE'2026-11-01' GROUP BY l_orderkey, dt)")
    result = same_rows(spark, q2.format(o="orders", r="order_revenue"), q2.format(o="ref_orders", r=ref_rev),
                       {"orders": ["2026-11-01"], "order_revenue": ["2026-11-01"]}, tpch_catalog)
    assert result["colocate"] and exchanges(result) == [0]


def test_tables_of_two_groups_with_one_map_count_join_bucket_by_bucket(spark, tpch_catalog, tpch_sources, plain,
                                                                       tmp_path):
    """flags copied into its own group g_flags (same bucket count and key type as g_tpch): its
    buckets live on other backends than orders', but Spark's bucket id of a row is the same in both
    groups, so the join runs bucket by bucket with no Exchange (issue 45), each side read from its
    own group's replicas; the explain names the pair. A group whose count does not divide shuffles
    with the reason (tests/joins/test_split_layouts.py)."""
    from airflow_colocate.core.contract import Source
    from airflow_colocate.core.sqltypes import parse_columns
    from airflow_colocate.jobs.write import write_in_session

    tpch_catalog.tables.create("flags_g", parse_columns("f_orderkey bigint, f_flag string, dt date"), ["f_orderkey"],
                              bucket_num=8, replication_num=2, partition_cols=["dt"], colocate_with="g_flags",
                              if_not_exists=True)
    for day in TWO_DAYS:
        write_in_session(spark, tpch_catalog, "flags_g", day,
                         Source(format="parquet", path=str(tpch_sources["flags"][day])), work_dir=tmp_path)
    q = "SELECT o.o_orderkey, f.f_flag FROM {o} o JOIN {f} f ON o.dt = f.dt AND o.o_orderkey = f.f_orderkey"
    result = same_rows(spark, q.format(o="orders", f="flags_g"), q.format(o="ref_orders", f="ref_flags"),
                       {"orders": TWO_DAYS, "flags_g": TWO_DAYS}, tpch_catalog)
    (j,) = result["joins"]
    assert j["colocate"] and exchanges(result) == [0], j
    assert "bucket layouts: group 1_g_flags (layout 8 buckets) joins group 1_g_tpch (layout 8) bucket by bucket at 8" \
        in result["explain"], result["explain"]


def test_read_helper_for_users_own_spark_code(spark, tpch_catalog, plain):
    """airflow_colocate.jobs.read.register: the user's own spark.sql over catalog tables, with the
    rows of plain Spark and the colocated plan (no Exchange under the join)."""
    from airflow_colocate.jobs.read import register
    from airflow_colocate.spark.physical_plan import joins_of

    tables = register(spark, {"orders": TWO_DAYS, "lineitem": None}, catalog=tpch_catalog)
    assert [(t.name, t.bucketed, len(t.partitions)) for t in tables] == [("orders", True, 2), ("lineitem", True, 2)]
    q = ("SELECT o.o_orderpriority, count(*) AS n, sum(l.l_extendedprice) AS revenue FROM {o} o JOIN {l} l "
         "ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.o_orderpriority")
    old = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # small test data would be broadcast
    try:
        mine, ref = spark.sql(q.format(o="orders", l="lineitem")), spark.sql(q.format(o="ref_orders", l="ref_lineitem"))
        assert mine.count() == ref.count() > 0
        assert mine.exceptAll(ref).count() == 0 and ref.exceptAll(mine).count() == 0
        (j,) = joins_of(mine)
        assert (j.left.exchanges, j.right.exchanges) == (0, 0) and sorted(j.left.tables + j.right.tables) == ["lineitem", "orders"]
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", old)


def test_explain_names_tables_and_keys_without_spark_attribute_ids(spark, tpch_catalog, plain):
    """Issue 16 (4): the explain is a few stable lines per join in the seeds' shape; Spark's raw plan
    (with its ``dt#42`` ids) stays next to it for whoever needs it."""
    import re

    q = ("SELECT o.o_orderkey, l.l_linenumber, f.f_flag FROM orders o "
         "JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey "
         "JOIN flags f ON f.dt = o.dt AND f.f_orderkey = o.o_orderkey")
    result = join_in_session(spark, tpch_catalog, q, {"orders": TWO_DAYS, "lineitem": TWO_DAYS, "flags": TWO_DAYS})
    text = result["explain"]
    assert not re.search(r"#\d+", text), text
    assert re.search(r"#\d+", result["physical_plan"])  # the raw plan is still there, ids and all
    blocks = text.split("join 2:")
    first, second = blocks[0], "join 2:" + blocks[1]
    assert first.splitlines()[0] in ("join 1: SORT MERGE JOIN (INNER)", "join 1: HASH JOIN (INNER)"), text
    assert "  colocate: true" in first.splitlines() and "  tables: orders ⋈ lineitem" in first.splitlines()
    assert "o.dt = l.dt" in first or "orders.dt = lineitem.dt" in first, text
    assert ("orders.o_orderkey = lineitem.l_orderkey" in first), text
    assert "  exchanges: 0 left, 0 right" in first.splitlines()
    assert "colocate: false, reason: " in second and "flags" in second and "flags.f_orderkey" in second, text


def test_a_join_stays_bucketed_through_a_down_backend_under_the_readable_policy(spark, tpch_catalog, plain):
    """Join policy 'readable': with be2 down (the group unstable, checked) every bucket still has a
    verified replica on an alive backend (replication 2), so the join stays bucketed, with no
    Exchange, and returns plain Spark's rows; the explain says which buckets read elsewhere than
    their map's first backend. With be2 and be3 down some bucket has no replica left on an alive
    backend: no join can read it, bucketed or not, so the outlook says joins shuffle and the query
    is refused naming that bucket. The seeds' rule ('stable', the default) shuffles throughout."""
    q = "SELECT o.o_orderkey, l.l_linenumber FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey"
    ours, ref = q.format(o="orders", l="lineitem"), q.format(o="ref_orders", l="ref_lineitem")
    tpch_catalog.backends.set_state("be2", "down", reason="disk pulled")
    tpch_catalog.health.check_group("g_tpch")
    try:
        assert not same_rows(spark, ours, ref, BOTH, tpch_catalog)["colocate"]  # the group's policy: the seeds'
        result = same_rows(spark, ours, ref, BOTH, tpch_catalog, join_policy="readable")  # this run only
        assert result["colocate"] and exchanges(result) == [0], result["explain"]
        assert "is not stable" in result["explain"] and "stays bucketed (join policy readable)" in result["explain"]
        tpch_catalog.groups.set_join_policy("g_tpch", "readable")  # the group's own policy now
        outlook = tpch_catalog.groups.outlook("g_tpch")
        assert not outlook.joins_shuffle and outlook.join_policy == "readable"
        assert same_rows(spark, ours, ref, BOTH, tpch_catalog)["colocate"]

        tpch_catalog.backends.set_state("be3", "down", reason="second disk")
        outlook = tpch_catalog.groups.outlook("g_tpch")
        assert outlook.joins_shuffle and re.search(r"/\S+ bucket (\d+)(?: \(and \d+ more\))? has no verified replica on an "
                                                   r"alive backend", outlook.joins_shuffle_reason), outlook
        with pytest.raises(PlacementError, match=r"bucket \d+ has no verified replica on an alive backend"):
            join_in_session(spark, tpch_catalog, ours, BOTH)
    finally:
        tpch_catalog.groups.set_join_policy("g_tpch", "stable")
        tpch_catalog.backends.set_state("be3", "alive")
        tpch_catalog.backends.set_state("be2", "alive")
        tpch_catalog.health.check_group("g_tpch")
