"""The ordered bucket read (issue 15): each (partition, bucket) replica is one file sorted by the
bucket key, so a bucket read partition by partition in ascending order is sorted by
(partition column, bucket key). The jar's rule (java/.../colocate/ordered) then replaces the sort
Spark puts under a colocated sort-merge join with a pass-through that checks every row's order:
same rows as plain Spark for every join type, no Sort in the plan, the sort kept for any other
order, and a replica whose rows are out of order stops the query instead of returning wrong rows."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable, Source
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session, prepare_join
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.planner.join import one_file_per_bucket, read_orders
from airflow_colocate.spark.read_order import keys_in_read_order
from airflow_colocate.spark import locality
from airflow_colocate.spark.join_job import run_join
from airflow_colocate.spark.physical_plan import final_plan
from colocate_testing import add_local_backends

pytestmark = pytest.mark.spark

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
TABLES = {"oa": DAYS, "ob": DAYS}
KINDS = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN",
         "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN"}
# oa: one row per key 0..299 a day; ob: keys 0..398 step 3, twice each, and a few null keys
SOURCES = {"oa": "SELECT id + {d} AS k, concat('a', id) AS v FROM range(300)",
           "ob": "SELECT CASE WHEN id % 97 = 5 THEN NULL ELSE 3 * (id % 133) END AS k, id + {d} AS w FROM range(266)"}


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    if not locality.ordered_read(spark):
        pytest.fail("the session does not load colocate.ordered.ColocateExtensions: build the jar (scripts/setup.sh)")
    root = tmp_path_factory.mktemp("ordered")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends", n=2)
    for name, cols in (("oa", "k bigint, v string, dt date"), ("ob", "k bigint, w bigint, dt date")):
        cat.tables.create(name, parse_columns(cols), ["k"], bucket_num=4, replication_num=1, partition_cols=["dt"],
                         colocate_with="g_ordered")
        refs = []
        for d, day in enumerate(DAYS):
            write_in_session(spark, cat, name, day, Source(query=SOURCES[name].format(d=d)), work_dir=root / "runs")
            refs.append(f"SELECT *, DATE'{day}' AS dt FROM ({SOURCES[name].format(d=d)})")
        spark.sql(" UNION ALL ".join(refs)).createOrReplaceTempView(f"ref_{name}")
    yield cat, root
    cat.dispose()


def query(kind: str, on: str = "x.dt = y.dt AND x.k = y.k", a: str = "oa", b: str = "ob") -> str:
    cols = "x.dt, x.k, x.v" + ("" if kind in ("semi", "anti") else ", y.k AS yk, y.w")
    return f"SELECT {cols} FROM {a} x {KINDS[kind]} {b} y ON {on}"


def run(spark, cat, sql: str, tables=None, **kw):
    """The join job, then the same query on its views: (report, rows, AQE's final plan)."""
    result = join_in_session(spark, cat, sql, tables or TABLES, **kw)
    df = spark.sql(sql)
    rows = sorted(map(tuple, df.collect()), key=repr)
    return result, rows, final_plan(df._jdf.queryExecution().executedPlan().toString())


def reference(spark, sql: str):
    return sorted(map(tuple, spark.sql(sql).collect()), key=repr)


@pytest.mark.parametrize("kind", list(KINDS))
def test_buckets_read_in_key_order_same_rows_no_sort(spark, lake, kind):
    cat, _ = lake
    expected = reference(spark, query(kind, a="ref_oa", b="ref_ob"))
    assert expected
    result, rows, physical = run(spark, cat, query(kind), hash_budget="1g")
    assert rows == expected and result["rows"] == len(expected)
    (j,) = result["joins"]
    assert j["colocate"] and j["method"] == "sort-merge" and "Exchange" not in physical, j
    assert physical.count("ColocateOrderedBucket [dt#") == 2 and "Sort [" not in physical, physical
    assert "bucket reads: 2 in key order (no sort, order checked per row), 0 sorted by Spark" in result["explain"]
    assert ("fits, but each bucket's files are sorted by the key and read in order, so the sort-merge join sorts "
            "nothing") in result["explain"]


def test_any_other_order_keeps_the_sort(spark, lake):
    """(k, dt) is not the order the files are read in, nor k alone over three days; k alone over
    one day is; and spark.colocate.sortedScan=false turns the ordered read off."""
    cat, _ = lake
    cases = [(query("inner", on="x.k = y.k AND x.dt = y.dt"), TABLES, 2),
             (query("full", on="x.k = y.k"), TABLES, 2),
             (query("inner", on=f"x.k = y.k AND x.dt = DATE'{DAYS[1]}' AND y.dt = DATE'{DAYS[1]}'"),
              {"oa": DAYS[1:2], "ob": DAYS[1:2]}, 0)]
    for sql, tables, sorts in cases:
        ref = sql.replace("FROM oa x", "FROM ref_oa x").replace("JOIN ob y", "JOIN ref_ob y")
        result, rows, physical = run(spark, cat, sql, tables, hash_budget=0)
        assert rows == reference(spark, ref), sql
        assert physical.count("Sort [") == sorts and physical.count("ColocateOrderedBucket [") == 2 - sorts, (sql, physical)
        assert f"bucket reads: {2 - sorts} in key order (no sort, order checked per row), {sorts} sorted" in result["explain"]
    spark.conf.set("spark.colocate.sortedScan", "false")
    try:
        assert not locality.ordered_read(spark)
        result, rows, physical = run(spark, cat, query("inner"), hash_budget=0)
    finally:
        spark.conf.unset("spark.colocate.sortedScan")
    assert rows == reference(spark, query("inner", a="ref_oa", b="ref_ob"))
    assert physical.count("Sort [") == 2 and "ColocateOrderedBucket" not in physical


def reversed_replica(plan, name: str, day: str, tmp_path: Path):
    """``plan`` with one replica of ``name`` on ``day`` replaced by a copy whose file holds the
    same rows sorted by the key descending (every row still of its bucket, so the row guard
    passes); and that bucket's number."""
    table = next(t for t in plan.tables if t.name == name)
    part = next(p for p in table.partitions if p.value == day)
    seq = next(s for s, c in enumerate(part.candidates) if c and c[0].rows > 1)
    src = Path(part.bucket_paths[seq].removeprefix("file://"))
    dst = tmp_path / f"reversed-{name}" / src.name
    shutil.copytree(src, dst)
    (data,) = [f for f in dst.iterdir() if f.suffix == ".parquet"]
    pq.write_table(pq.read_table(data).sort_by([("k", "descending")]), data)
    paths = list(part.bucket_paths)
    paths[seq] = dst.as_uri()
    tampered = replace(part, bucket_paths=paths, candidates=[])  # registered unchecked: sizes changed
    table_tampered = replace(table, partitions=[tampered if p is part else p for p in table.partitions])
    return replace(plan, tables=[table_tampered if t is table else t for t in plan.tables]), seq


def out_of_order_line(name: str, seq: int) -> str:
    return (rf"^colocate: table {name} bucket {seq} is not in \(dt, k\) order at its row \d+: its replica's files "
            r"were not written sorted by the bucket key, .* so the query stops instead of returning wrong rows")


def test_rows_out_of_order_stop_the_query(spark, lake, tmp_path):
    """A replica whose file holds its bucket's rows in the wrong order would make the merge join
    miss matches: the query stops with a line naming the table, the bucket and the order, and
    returns nothing. (bigint key and date partition: the check compares them as longs.)"""
    cat, _ = lake
    plan, _ = prepare_join(cat, query("inner"), TABLES, work_dir=tmp_path / "runs", hash_budget=0)
    plan, seq = reversed_replica(plan, "ob", DAYS[1], tmp_path)
    with pytest.raises(ColocateError) as err:
        run_join(spark, plan)
    assert re.search(out_of_order_line("ob", seq), str(err.value)), str(err.value)


def test_string_keys_are_checked_too(spark, lake, tmp_path):
    """A string bucket key takes the check's other path (keys kept by projections): in order, the
    self-join returns plain Spark's rows with no sort; a reversed replica stops the query."""
    cat, root = lake
    if "os" not in {t.name for t in cat.tables.list()}:
        cat.tables.create("os", parse_columns("k string, v bigint, dt date"), ["k"], bucket_num=4, replication_num=1,
                         partition_cols=["dt"], colocate_with="g_ordered_s")
        write_in_session(spark, cat, "os", DAYS[0], Source(query="SELECT concat('s', id % 50) AS k, id AS v FROM range(200)"),
                         work_dir=root / "runs")
    sql = "SELECT x.k, x.v, y.v AS yv FROM os x JOIN os y ON x.dt = y.dt AND x.k = y.k"
    ref = ("SELECT x.k, x.v, y.v AS yv FROM (SELECT concat('s', id % 50) AS k, id AS v FROM range(200)) x "
           "JOIN (SELECT concat('s', id % 50) AS k, id AS v FROM range(200)) y ON x.k = y.k")
    result, rows, physical = run(spark, cat, sql, {"os": DAYS[:1]}, hash_budget=0)
    assert rows == reference(spark, ref) and len(rows) == 800
    assert physical.count("ColocateOrderedBucket [") == 2 and "Sort [" not in physical, physical
    plan, _ = prepare_join(cat, sql, {"os": DAYS[:1]}, work_dir=tmp_path / "runs", hash_budget=0)
    plan, seq = reversed_replica(plan, "os", DAYS[0], tmp_path)
    with pytest.raises(ColocateError) as err:
        run_join(spark, plan)
    assert re.search(out_of_order_line("os", seq), str(err.value)), str(err.value)


def test_which_plans_read_in_order():
    def table(name, files, days=2):
        parts = [ReadPartition(value=f"d{i}", bucket_paths=["/p/b0", ""],
                               candidates=[[ReadReplica(replica_id=0, backend_id=1, path="/p/b0", bytes=10, files=files)],
                                           []]) for i in range(days)]
        return ReadTable(name=name, columns=[["k", "bigint"], ["dt", "date"]], dist_cols=["k"], partition_cols=["dt"],
                         bucket_num=2, partitions=parts)
    one, two, unknown = table("a", [["f", 10]]), table("b", [["f", 5], ["g", 5]]), table("c", None)
    assert one_file_per_bucket([one]) and not one_file_per_bucket([one, two]) and not one_file_per_bucket([unknown])
    assert keys_in_read_order([(["dt", "k"], ["dt", "k"])], read_orders([one]))
    assert keys_in_read_order([(["dt"], ["dt"])], read_orders([one]))
    assert not keys_in_read_order([(["k", "dt"], ["k", "dt"])], read_orders([one]))
    assert not keys_in_read_order([(["k"], ["k"])], read_orders([one]))  # two days: k alone is not the order
    assert keys_in_read_order([(["k"], ["k"])], read_orders([table("d", [["f", 1]], days=1)]))
    assert not keys_in_read_order([([None, "k"], ["dt", "k"])], read_orders([one])) and not keys_in_read_order([], read_orders([one]))
