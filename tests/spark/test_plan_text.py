"""physical_plan's text reader (Spark Connect's only view of a plan, and the join job's where the
text is the whole plan) on plan text captured verbatim from a local PySpark 4.2 session, no Spark
needed here. The session: warehouse tables ``fact`` (k, p; partitioned by p), ``dim`` (p, v) and
``dim2`` (v, w), written with saveAsTable, broadcast and dynamic partition pruning at their defaults;
each file's JVM walk (``joins_of``) gave exactly the joins asserted below.

- dpp_after_run.txt: ``SELECT f.k FROM fact f JOIN dim d ON f.p = d.p WHERE d.v < 2`` after
  ``collect()``: AQE's final plan, whose pruning subquery prints its own adaptive plan, with its own
  Final/Initial markers, under the fact scan;
- dpp_join_in_subquery.txt: ``SELECT f.k FROM fact f JOIN (SELECT d.p FROM dim d JOIN dim2 e ON
  d.v = e.v WHERE e.w < 2) x ON f.p = x.p`` before it runs: the pruning subquery holds a join;
- nested_loop_anti.txt: ``SELECT f.k FROM fact f LEFT ANTI JOIN dim d ON f.k < d.v``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_colocate.spark.physical_plan import final_plan, joins_of_text

PLANS = Path(__file__).parent / "plan_texts"


def read(name: str) -> str:
    return (PLANS / name).read_text()


def summary(text: str) -> list[tuple]:
    return [(j.kind, j.left.tables, j.left.exchanges, j.right.tables, j.right.exchanges, j.keys)
            for j in joins_of_text(text)]


def test_a_pruning_subquery_after_the_run_is_no_part_of_the_join_tree():
    text = read("dpp_after_run.txt")
    assert "SubqueryBroadcast dynamicpruning#18" in text  # the case this file is here for
    assert summary(text) == [("inner", ["fact"], 0, ["dim"], 1, [(("fact", "p"), ("dim", "p"))])]


def test_the_final_plan_is_cut_at_the_plan_s_own_markers_not_the_subquery_s():
    final = final_plan(read("dpp_after_run.txt"))
    assert "BroadcastQueryStage 0" in final  # the join's build side, printed after the subquery's markers
    assert "== Initial Plan ==" in final  # the subquery's own, kept (the reader skips the subquery)
    assert "\n   Project [k#11L]" not in final  # the top plan's initial plan, cut


def test_a_join_inside_a_pruning_subquery_is_not_read_as_one_of_the_plan_s():
    text = read("dpp_join_in_subquery.txt")
    assert text.count("BroadcastHashJoin [v#14L], [v#20L]") == 2  # once in the subquery, once in the plan
    assert summary(text) == [
        ("inner", ["dim"], 0, ["dim2"], 1, [(("dim", "v"), ("dim2", "v"))]),
        ("inner", ["fact"], 1, ["dim", "dim2"], 0, [(("fact", "p"), ("dim", "p"))]),
    ]


def test_a_nested_loop_join_s_type_follows_its_build_side():
    text = read("nested_loop_anti.txt")
    assert "BroadcastNestedLoopJoin BuildRight, LeftAnti," in text
    assert summary(text) == [("anti", ["fact"], 0, ["dim"], 1, [])]


@pytest.mark.parametrize("name", ["dpp_after_run.txt", "dpp_join_in_subquery.txt", "nested_loop_anti.txt"])
def test_the_captured_text_is_whole(name):
    """A file cut short (a lost tail) would still parse: each ends at its last scan, as Spark printed it."""
    assert read(name).rstrip().splitlines()[-1].lstrip(" :+-").startswith("FileScan parquet")
