"""The join prediction, without Spark: the seeds' rules for when a join needs no shuffle."""

from __future__ import annotations

import pytest

from airflow_colocate.model.reasons import Fallback
from airflow_colocate.spark.join_job import keys_cover, predict_join

NOT_COVERED = Fallback.NOT_COVERED.sentence
NOT_SAME_GROUP = Fallback.NOT_SAME_GROUP.sentence

DIST = {"o": ["o_orderkey"], "l": ["l_orderkey"], "a": ["k1", "k2"], "b": ["j1", "j2"], "f": ["f_orderkey"]}
GROUPS = {"o": "1.1", "l": "1.1", "a": "1.2", "b": "1.2", "f": ""}
OK = {t: "" for t in DIST}


def predict(left, right, keys, carriers=None, reasons=OK, groups=GROUPS):
    return predict_join(left, right, carriers or (left, right), keys, reasons=reasons, groups=groups, dist_cols=DIST)


def test_keys_cover_position_by_position():
    assert keys_cover(["k1", "k2"], ["j1", "j2"], [("k1", "j1"), ("k2", "j2")])
    assert keys_cover(["k1"], ["J1"], [("dt", "dt"), ("K1", "j1")])  # extra pairs, any case
    assert not keys_cover(["k1", "k2"], ["j1", "j2"], [("k1", "j2"), ("k2", "j1")])  # crossed positions
    assert not keys_cover(["k1", "k2"], ["j1", "j2"], [("k1", "j1")])  # a distribution column left out
    assert not keys_cover(["k1"], ["j1", "j2"], [("k1", "j1")])


def test_bucket_key_join_in_one_stable_group_is_colocated():
    keys = [(("o", "dt"), ("l", "dt")), (("o", "o_orderkey"), ("l", "l_orderkey"))]
    assert predict(["o"], ["l"], keys) == (True, None)


def test_each_reason():
    keys = [(("o", "o_orderkey"), ("l", "l_orderkey"))]
    assert predict(["o"], ["l"], [(("o", "o_custkey"), ("l", "l_orderkey"))]) == (False, NOT_COVERED)
    assert predict(["o"], ["l"], [(None, ("l", "l_orderkey"))]) == (False, NOT_COVERED)  # an expression key
    unstable = {**OK, "o": "group is not stable: maintenance", "l": "group is not stable: maintenance"}
    assert predict(["o"], ["l"], keys, reasons=unstable) == (False, "group is not stable: maintenance")
    assert predict(["o"], ["f"], [(("o", "o_orderkey"), ("f", "f_orderkey"))],
                   reasons={**OK, "f": "table is not colocated"}) == (False, "table is not colocated")
    assert predict(["o"], ["a"], [(("o", "o_orderkey"), ("a", "k1"))]) == (False, NOT_SAME_GROUP)


def test_multi_column_keys_need_every_position():
    good = [(("a", "k1"), ("b", "j1")), (("a", "k2"), ("b", "j2"))]
    assert predict(["a"], ["b"], good) == (True, None)
    assert predict(["a"], ["b"], good[:1]) == (False, NOT_COVERED)
    crossed = [(("a", "k1"), ("b", "j2")), (("a", "k2"), ("b", "j1"))]
    assert predict(["a"], ["b"], crossed) == (False, NOT_COVERED)


@pytest.mark.parametrize("carriers, expected", [
    ((["o", "l"], ["o2"]), True),  # after an inner join both inputs still partition the output
    ((["l"], ["o2"]), True),  # a right outer join: the key of the kept side
    ((["o"], ["o2"]), False),  # a left outer join kept orders only; the next join is on lineitem's key
])
def test_nested_joins_use_the_side_whose_bucketing_survives(carriers, expected):
    dist = {**DIST, "o2": ["o_orderkey"]}
    keys = [(("l", "l_orderkey"), ("o2", "o_orderkey"))]
    got = predict_join(["o", "l"], ["o2"], carriers, keys, reasons={**OK, "o2": ""}, groups={**GROUPS, "o2": "1.1"},
                       dist_cols=dist)
    assert got[0] is expected


def test_after_a_full_outer_join_nothing_is_bucketed_any_more():
    got = predict_join(["o", "l"], ["o2"], ([], ["o2"]), [(("o", "o_orderkey"), ("o2", "o_orderkey"))],
                       reasons={**OK, "o2": ""}, groups={**GROUPS, "o2": "1.1"}, dist_cols={**DIST, "o2": ["o_orderkey"]})
    assert got[0] is False and got[1].startswith(NOT_COVERED)


def test_tables_named_in_upper_case_match_spark_folded_names():
    """The seeds' ``FROM A A JOIN B B``: Spark scans ``__cl_a``, the plan says ``A`` (issue 13: this
    crashed the join job with KeyError 'a'). Pure: a hand-made join node, no Spark session."""
    from airflow_colocate.core.contract import JoinPlan, ReadTable
    from airflow_colocate.spark.join_job import explain_join, should_be_colocated
    from airflow_colocate.spark.physical_plan import JoinNode, Side

    tables = [ReadTable(name=n, columns=[["id", "bigint"], ["dt", "date"]], dist_cols=["id"], partition_cols=["dt"],
                        bucket_num=4, partitions=[]) for n in ("A", "B")]
    plan = JoinPlan(job_id="j", query="q", tables=tables, reasons={"A": "", "B": ""}, groups={"A": "1.1", "B": "1.1"},
                    require_colocate=True, report_uri="file:///tmp/r.json")
    node = JoinNode(description="SortMergeJoin", left=Side(tables=["a"], carriers=["a"]),
                    right=Side(tables=["b"], carriers=["b"]),
                    keys=[(("a", "dt"), ("b", "dt")), (("a", "id"), ("b", "id"))])
    e = explain_join(node, plan)
    assert e.planned and e.colocate and e.left_tables == ["A"] and e.right_tables == ["B"]
    assert should_be_colocated(e, plan)
