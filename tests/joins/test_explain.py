"""planner.explain: the join explain's shape, from hand-made decisions (pure, no Spark)."""

from __future__ import annotations

import re

from airflow_colocate.core.contract import JoinExplain
from airflow_colocate.planner.explain import NO_JOIN, explain_text, key_names, operator_name


def test_operator_names_in_the_seeds_capitals():
    assert operator_name("SortMergeJoin [o_orderkey#12L], [l_orderkey#40L], Inner") == "SORT MERGE JOIN"
    assert operator_name("ShuffledHashJoin [a#1], [b#2], Inner, BuildRight") == "HASH JOIN"
    assert operator_name("BroadcastHashJoin [a#1], [b#2], LeftOuter, BuildRight, false") == "BROADCAST HASH JOIN"


def test_a_colocated_and_a_fallback_join_render_stable_lines():
    ok = JoinExplain(join="SortMergeJoin [dt#3, o_orderkey#1L], [dt#9, l_orderkey#7L], Inner", left_tables=["orders"],
                     right_tables=["lineitem"], exchanges_left=0, exchanges_right=0, colocate=True, reason=None,
                     planned=True, kind="inner",
                     keys=key_names([(("orders", "dt"), ("lineitem", "dt")), (("orders", "o_orderkey"), ("lineitem", "l_orderkey"))]))
    shuffled = JoinExplain(join="SortMergeJoin [o_orderkey#1L], [f_orderkey#20L], LeftOuter",
                           left_tables=["orders", "lineitem"], right_tables=["flags"], exchanges_left=1,
                           exchanges_right=1, colocate=False, reason="table is not colocated", planned=False,
                           kind="left", keys=key_names([(("orders", "o_orderkey"), None)]))
    text = explain_text([ok, shuffled], ["bucket join: sort-merge (hash join disabled (budget 0))"])
    assert text.splitlines() == [
        "join 1: SORT MERGE JOIN (INNER)",
        "  colocate: true",
        "  tables: orders ⋈ lineitem",
        "  keys: orders.dt = lineitem.dt, orders.o_orderkey = lineitem.l_orderkey",
        "  exchanges: 0 left, 0 right",
        "join 2: SORT MERGE JOIN (LEFT OUTER)",
        "  colocate: false, reason: table is not colocated",
        "  tables: orders+lineitem ⋈ flags",
        "  keys: orders.o_orderkey = <expression>",
        "  exchanges: 1 left, 1 right",
        "bucket join: sort-merge (hash join disabled (budget 0))",
    ]
    assert not re.search(r"#\d+", text)


def test_a_surprise_says_what_the_planner_predicted():
    e = JoinExplain(join="SortMergeJoin", left_tables=["a"], right_tables=["b"], exchanges_left=1, exchanges_right=0,
                    colocate=False, reason="Spark shuffled a join the planner expected to be colocated", planned=True)
    assert "  planner predicted: colocate: true" in explain_text([e]).splitlines()


def test_a_query_without_joins_says_so():
    assert explain_text([], ["bucket join: hash"]) == NO_JOIN


def test_key_names_map_spark_lower_case_back_to_the_query_names():
    assert key_names([(("a", "id"), ("b", "id"))], {"a": "A", "b": "B"}) == ["A.id = B.id"]
