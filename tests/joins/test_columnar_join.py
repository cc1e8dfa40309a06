"""The columnar bucket merge join (issue 32): where Spark plans a sort-merge join over two ordered
bucket reads, ``spark.colocate.join.columnar=true`` puts the jar's ``ColocateColumnarMergeJoin`` in
its place. Same rows as plain Spark for inner, left/right outer, semi and anti joins; other join
types keep Spark's join; the flag's default (``auto``) leaves Spark's join while the operator does
not pay off (docs/benchmarks.md); a replica out of order or holding another bucket's row still
stops the query in one line."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.join import prepare_join
from airflow_colocate.spark.join_job import run_join
from airflow_colocate.spark.session import scoped
from test_ordered_read import DAYS, KINDS, TABLES, lake, out_of_order_line, query, reference, reversed_replica, run  # noqa: F401

pytestmark = pytest.mark.spark

FLAG = "spark.colocate.join.columnar"
NODE = "ColocateColumnarMergeJoin"
COLUMNAR_KINDS = ["inner", "left", "right", "semi", "anti"]


@pytest.fixture
def columnar(spark):
    with scoped(spark, {FLAG: "true"}):
        yield spark


@pytest.mark.parametrize("kind", COLUMNAR_KINDS)
def test_columnar_join_same_rows_as_spark(columnar, lake, kind):
    """Nulls in keys, duplicate keys (ob holds each twice), buckets empty on one side, three days
    per bucket: the same rows as plain Spark, joined by the columnar operator with no sort."""
    cat, _ = lake
    spark = columnar
    expected = reference(spark, query(kind, a="ref_oa", b="ref_ob"))
    result, rows, physical = run(spark, cat, query(kind), hash_budget=0)
    assert rows == expected and result["rows"] == len(expected)
    assert f"{NODE} [dt#" in physical and "SortMergeJoin" not in physical and "Sort [" not in physical, physical
    assert "ColumnarToRow" in physical  # rows only where a row operator reads the batches
    assert ("bucket reads: 2 in key order (no sort, order checked per row), 0 sorted by Spark; 1 merge join(s) on "
            f"column batches ({NODE})") in result["explain"], result["explain"]


def test_with_a_join_condition_and_pushed_filters(columnar, lake):
    """A condition beyond the keys (evaluated per matched pair) and filters pushed to both reads."""
    cat, _ = lake
    for kind in COLUMNAR_KINDS:
        on = "x.dt = y.dt AND x.k = y.k AND x.k + y.w > 150 AND y.w % 3 <> 1 AND x.v <> 'a7'"
        result, rows, physical = run(columnar, cat, query(kind, on=on), hash_budget=0)
        assert rows == reference(columnar, query(kind, on=on, a="ref_oa", b="ref_ob")), kind
        assert NODE in physical, physical


@pytest.mark.parametrize("batch_rows", ["3", "4096"])
def test_count_over_the_join_reads_no_column(columnar, lake, batch_rows):
    """SELECT count(*) over the join (SQL1's shape): the join under the empty projection hands on
    batches of a row count only. Every join kind and a three-way join count what Spark counts, with
    the output cut into 3-row batches (a run's pairs split across them) or not."""
    cat, _ = lake
    on = "x.dt = y.dt AND x.k = y.k"
    sqls = [f"SELECT count(*) FROM {{a}} x {KINDS[kind]} {{b}} y ON {on}" for kind in COLUMNAR_KINDS]
    sqls.append(f"SELECT count(*) FROM {{a}} x JOIN {{b}} y ON {on} JOIN {{a}} z ON x.dt = z.dt AND x.k = z.k")
    with scoped(columnar, {"spark.colocate.join.columnar.batchRows": batch_rows}):
        for sql in sqls:
            _, rows, physical = run(columnar, cat, sql.format(a="oa", b="ob"), hash_budget=0)
            expected = reference(columnar, sql.format(a="ref_oa", b="ref_ob"))
            assert rows == expected and expected[0][0] > 0, sql
            assert "no output column (rows counted)" in physical and "SortMergeJoin" not in physical, physical


@pytest.mark.parametrize("batch_rows", ["3", "4096"])
def test_many_to_many_inside_one_scan_batch(columnar, lake, batch_rows):
    """ob joined to itself: every key twice on both sides, inside one scan batch, so the inner join's
    one-loop path (``Merge.fastInner``) meets runs of 2 x 2 pairs; with 3-row output batches they do
    not fit and are handed back to the general path. Rows and counts are Spark's."""
    cat, _ = lake
    on = "x.dt = y.dt AND x.k = y.k"
    sqls = [f"SELECT x.dt, x.k, x.w, y.w AS w2 FROM {{b}} x JOIN {{b}} y ON {on}",
            f"SELECT count(*) FROM {{b}} x JOIN {{b}} y ON {on}"]
    with scoped(columnar, {"spark.colocate.join.columnar.batchRows": batch_rows}):
        for sql in sqls:
            _, rows, physical = run(columnar, cat, sql.format(b="ob"), hash_budget=0)
            expected = reference(columnar, sql.format(b="ref_ob"))
            assert rows == expected and len(expected) > 0, sql
            assert NODE in physical and "SortMergeJoin" not in physical, physical
    runs = reference(columnar, f"SELECT max(n) FROM (SELECT count(*) AS n FROM ref_ob x JOIN ref_ob y ON {on} GROUP BY x.dt, x.k)")
    assert runs[0][0] == 4  # the case is many-to-many: a key's 2 rows meet 2 rows


def test_other_join_types_and_false_keep_spark_join_and_the_default_is_columnar(spark, lake):
    cat, _ = lake
    with scoped(spark, {FLAG: "true"}):
        _, rows, physical = run(spark, cat, query("full"), hash_budget=0)
    assert rows == reference(spark, query("full", a="ref_oa", b="ref_ob"))
    assert "SortMergeJoin" in physical and NODE not in physical
    with scoped(spark, {FLAG: "false"}):
        _, rows, physical = run(spark, cat, query("inner"), hash_budget=0)
    assert "SortMergeJoin" in physical and NODE not in physical
    for value in (None, "auto", "AUTO "):  # auto (the default): on, since it pays off (docs/benchmarks.md)
        with scoped(spark, {FLAG: value}):
            _, rows, physical = run(spark, cat, query("inner"), hash_budget=0)
        assert NODE in physical and "SortMergeJoin" not in physical, value
        assert rows == reference(spark, query("inner", a="ref_oa", b="ref_ob")), value


def test_a_bad_flag_value_is_one_line(spark, lake):
    cat, _ = lake
    with scoped(spark, {FLAG: "sometimes"}), pytest.raises(Exception) as err:
        spark.sql(query("inner")).collect()
    assert "colocate: spark.colocate.join.columnar=sometimes is not a setting: use auto, true or false" in str(err.value)


def test_rows_out_of_order_stop_the_columnar_join(columnar, lake, tmp_path):
    cat, _ = lake
    for kind in ("inner", "anti"):
        plan, _ = prepare_join(cat, query(kind), TABLES, work_dir=tmp_path / "runs", hash_budget=0)
        plan, seq = reversed_replica(plan, "ob", DAYS[1], tmp_path / kind)
        with pytest.raises(ColocateError) as err:
            run_join(columnar, plan)
        assert re.search(out_of_order_line("ob", seq), str(err.value)), str(err.value)


def test_a_row_of_another_bucket_stops_the_columnar_join(columnar, lake, tmp_path):
    """A replica holding another bucket's rows (in key order, so only the guard can tell): the
    view's guard, applied by the operator to the batches, stops the query naming the replica."""
    cat, _ = lake
    plan, _ = prepare_join(cat, query("inner"), TABLES, work_dir=tmp_path / "runs", hash_budget=0)
    table = next(t for t in plan.tables if t.name == "oa")
    part = next(p for p in table.partitions if p.value == DAYS[0])
    src = Path(part.bucket_paths[1].removeprefix("file://"))
    dst = tmp_path / "wrong" / "b00000"
    shutil.copytree(src, dst)
    paths = list(part.bucket_paths)
    paths[0] = dst.as_uri()  # bucket 1's file registered as bucket 0
    wrong = replace(part, bucket_paths=paths, candidates=[])
    table = replace(table, partitions=[wrong if p is part else p for p in table.partitions])
    plan = replace(plan, tables=[table if t.name == "oa" else t for t in plan.tables])
    with pytest.raises(ColocateError) as err:
        run_join(columnar, plan)
    line = str(err.value)
    assert re.search(rf"colocate: table (default\.)?oa partition {DAYS[0]} bucket 0 \(replica {re.escape(dst.as_uri())}/?\) "
                     r"holds a row of bucket 1", line), line
    assert "\n" not in line
    assert pq.read_table(dst).num_rows > 0
