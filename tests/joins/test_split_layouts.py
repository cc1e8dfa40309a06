"""Bucket counts in multiples (issue 45, points 2 and 3): a group split from 8 to 16 buckets keeps
its old partitions at 8 and writes new ones at 16, each finer bucket j as its own file in the
directory of bucket j mod 8 (Spark's pmod(h, 16) mod 8 = pmod(h, 8)). The seeds' SQL1 and SQL2 over
ten days of both layouts stay colocated with no Exchange and return plain Spark's rows; so does a
join with a group written at 32 buckets; verify proves the finer bucket of every file; a repair
after a lost backend restores both layouts."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.core.contract import RowCheck
from airflow_colocate.jobs.bulk_import import import_in_session
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.verify import session_runner, verify
from airflow_colocate.spark.verify_job import judge
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.physical_plan import final_plan
from airflow_colocate.storage import layout
from colocate_testing import add_local_backends

pytestmark = pytest.mark.spark

DAYS = [(dt.date(2026, 10, 1) + dt.timedelta(days=i)).isoformat() for i in range(10)]
IN_DAYS = ", ".join(f"DATE'{d}'" for d in DAYS)
# The seeds' tables (bench/bench_seeds.py) at a few hundred rows a day; ids unique and unsorted.
SCHEMA = {"A": "id bigint, name string, second_id bigint, second_name string, dt date",
          "B": "id bigint, weight_time timestamp, list string, dt date",
          "C": "id bigint, ord_id bigint, _id string, dt date"}
ID = "pmod(k * 2654435761, 1099511627776)"
COLUMNS = {"A": f"{ID} AS id, concat('name_', k) AS name, k % 1000 AS second_id, concat('second_', k % 1000) AS second_name",
           "B": f"{ID} AS id, timestamp_seconds(1790000000 + k) AS weight_time, concat('[', k % 7, ',', k % 11, ']') AS list",
           "C": f"{ID} AS id, k * 3 AS ord_id, concat('c', k) AS _id"}
ROWS = {"A": 400, "B": 300, "C": 350}  # B and C hold a subset of A's ids: the joins drop rows
SQL1 = ("SELECT count(*) FROM {A} t1 JOIN {B} t5 ON t1.dt = t5.dt AND t1.id = t5.id "
        f"JOIN {{C}} t6 ON t1.dt = t6.dt AND t1.id = t6.id WHERE t1.dt IN ({IN_DAYS})")
SQL2 = ("SELECT t1.dt, t1.id, t1.name, t1.second_id, t1.second_name, t5.id AS id5, t5.weight_time, t5.list, "
        "t6.ord_id, t6._id FROM {A} t1 JOIN {B} t5 ON t1.dt = t5.dt AND t1.id = t5.id "
        f"JOIN {{C}} t6 ON t1.dt = t6.dt AND t1.id = t6.id WHERE t1.dt IN ({IN_DAYS})")


def source(name: str, day: int) -> str:
    return f"SELECT {COLUMNS[name]} FROM (SELECT id + {day * 1000} AS k FROM range({ROWS[name]}))"


WIDE_DAYS = DAYS[4:6]  # D's days: one of g_seeds' 8-bucket days, one of its 16-bucket days


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """A, B, C in g_seeds (8 buckets, 2 replicas, 3 backends): days 1-5 imported at 8 buckets, then
    the group split by 2 and days 6-10 imported at 16 (the bulk import's path: one Spark job a
    table each time). D in g_wide, created at 8 and split by 4 before its first write: two days
    written one by one (the write's path) at 32 buckets."""
    root = tmp_path_factory.mktemp("split")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends", n=3)
    for name in "ABC":
        cat.tables.create(name, parse_columns(SCHEMA[name]), ["id"], bucket_num=8, replication_num=2,
                          partition_cols=["dt"], colocate_with="g_seeds")
    cat.tables.create("D", parse_columns(SCHEMA["C"]), ["id"], bucket_num=8, replication_num=2,
                      partition_cols=["dt"], colocate_with="g_wide")
    cat.groups.split("g_wide", 4)
    for name in "ABCD":
        days = WIDE_DAYS if name == "D" else DAYS
        refs = [f"SELECT *, DATE'{day}' AS dt FROM ({source('C' if name == 'D' else name, DAYS.index(day))})"
                for day in days]
        spark.sql(" UNION ALL ".join(refs)).createOrReplaceTempView(f"ref_{name}")
        if name != "D":
            spark.table(f"ref_{name}").write.partitionBy("dt").parquet(str(root / "src" / name))
    for days in (DAYS[:5], DAYS[5:]):
        if days[0] == DAYS[5]:
            cat.groups.split("g_seeds", 2)
        for name in "ABC":
            import_in_session(spark, cat, name, str(root / "src" / name), partitions=days, work_dir=root / "runs",
                              echo=lambda _: None)
    for day in WIDE_DAYS:
        write_in_session(spark, cat, "D", day, Source(query=source("C", DAYS.index(day))), work_dir=root / "runs")
    yield cat, root
    cat.dispose()


def rows_of(spark, sql: str):
    return sorted(map(tuple, spark.sql(sql).collect()), key=repr)


def joined(spark, cat, sql: str, names: str):
    """The join job over ``names`` (all ten days), then the same query on its views: (report, rows, plan)."""
    result = join_in_session(spark, cat, sql.format(A=names[0], B=names[1], C=names[2]), {n: DAYS for n in set(names)})
    df = spark.sql(sql.format(A=names[0], B=names[1], C=names[2]))
    rows = sorted(map(tuple, df.collect()), key=repr)
    return result, rows, final_plan(df._jdf.queryExecution().executedPlan().toString())


def test_split_group_writes_new_days_at_the_finer_layout(lake):
    cat, root = lake
    g = cat.groups.get("g_seeds")
    assert (g.bucket_num, g.layout) == (8, 16) and len(g.bucket_map) == 8
    assert cat.groups.get("g_wide").layout == 32
    parts = {p.value: p for p in cat.partitions.list("A")}
    assert all(parts[d].bucket_num == 8 for d in DAYS)
    # each bucket directory of a day at 16 holds the files of buckets b and b + 8, named so
    files = {}
    for t, d in (("A", DAYS[0]), ("A", DAYS[9]), ("D", WIDE_DAYS[0])):
        (bdir,) = sorted((root / "backends").glob(f"be*/default/{t}_*/{d}/v000001/b00003"))[:1]
        files[t, d] = sorted(p.name for p in bdir.iterdir() if p.suffix == ".parquet")
    assert [layout.layout_bucket_of(n) for n in files["A", DAYS[0]]] == [None]
    assert [layout.layout_bucket_of(n) for n in files["A", DAYS[9]]] == [3, 11]
    assert [layout.layout_bucket_of(n) for n in files["D", WIDE_DAYS[0]]] == [3, 11, 19, 27]
    for n in files["A", DAYS[9]] + files["D", WIDE_DAYS[0]]:  # Spark's bucket id in the name: the map bucket
        assert n.split(".")[0].endswith("_00003")


@pytest.mark.parametrize("sql", [SQL1, SQL2], ids=["SQL1", "SQL2"])
def test_seeds_queries_over_both_layouts_are_colocated_and_exact(spark, lake, sql):
    cat, _ = lake
    expected = rows_of(spark, sql.format(A="ref_A", B="ref_B", C="ref_C"))
    assert expected and (len(expected) > 100 or expected[0][0] > 100), expected[:3]
    result, rows, physical = joined(spark, cat, sql, "ABC")
    assert rows == expected
    assert len(result["joins"]) == 2 and all(j["colocate"] for j in result["joins"]), result["joins"]
    assert "Exchange" not in physical.split("HashAggregate")[-1], physical
    assert "layouts" in result["explain"] and "8 and 16 buckets" in result["explain"], result["explain"]


def test_join_with_a_group_at_32_buckets(spark, lake):
    """g_seeds (8 and 16) against g_wide (32), bucket by bucket at 8: bucket b of the coarser side
    against its finer buckets b, b+8, ... of the other, which live in the same directory."""
    cat, _ = lake
    sql = ("SELECT t1.dt, t1.id, t1.name, t6.ord_id FROM {A} t1 JOIN {C} t6 ON t1.dt = t6.dt AND t1.id = t6.id "
           "WHERE t6.ord_id % 2 = 0")
    expected = rows_of(spark, sql.format(A="ref_A", C="ref_D"))
    assert expected
    result = join_in_session(spark, cat, sql.format(A="A", C="D"), {"A": WIDE_DAYS, "D": WIDE_DAYS})
    df = spark.sql(sql.format(A="A", C="D"))
    assert sorted(map(tuple, df.collect()), key=repr) == expected
    physical = final_plan(df._jdf.queryExecution().executedPlan().toString())
    (j,) = result["joins"]
    assert j["colocate"], j
    assert "Exchange" not in physical, physical
    assert "group 1_g_wide (layout 32 buckets) joins group 1_g_seeds (layout 16) bucket by bucket at 8" in \
        result["explain"], result["explain"]


@pytest.fixture(scope="module")
def created_finer(spark, lake):
    """F in g_fine16 (created at 16 buckets, B's rows) and G in g_fine32 (created at 32, C's rows),
    each written for D's two days: their map counts are multiples of g_seeds' 8, each bucket its
    own replica directory (no families)."""
    cat, root = lake
    for name, like, buckets in (("F", "B", 16), ("G", "C", 32)):
        cat.tables.create(name, parse_columns(SCHEMA[like]), ["id"], bucket_num=buckets, replication_num=2,
                          partition_cols=["dt"], colocate_with=f"g_fine{buckets}")
        for day in WIDE_DAYS:
            write_in_session(spark, cat, name, day, Source(query=source(like, DAYS.index(day))), work_dir=root / "runs")
    return cat


WIDE = ", ".join(f"DATE'{d}'" for d in WIDE_DAYS)
# The coarser group first, and the finer groups first (a join over a join of two coalesced reads).
CREATED_FINER = {
    "SQL2": SQL2.replace(IN_DAYS, WIDE),
    "finer first": ("SELECT t6.dt, t6.id, t6.ord_id, t5.list, t1.name FROM {C} t6 JOIN {B} t5 ON t6.dt = t5.dt AND "
                    "t6.id = t5.id JOIN {A} t1 ON t1.dt = t6.dt AND t1.id = t6.id"),
}


@pytest.mark.parametrize("shape", sorted(CREATED_FINER))
def test_groups_created_at_16_and_32_join_one_at_8_bucket_by_bucket(spark, lake, created_finer, shape):
    """A (g_seeds: map 8, days at 8 and 16) with F (created at 16) and G (created at 32): read at 8,
    task b of F and G reads their buckets b, b+8, ... each from its own replica directory (Spark's
    coalesced bucketed scan, asked for by the jar's CoalescedBucketScan); no Exchange anywhere under
    the joins, exactly the rows of plain Spark over the same data."""
    cat = created_finer
    sql = CREATED_FINER[shape]
    ref = {n: f"(SELECT * FROM ref_{n} WHERE dt IN ({WIDE}))" for n in "ABC"}
    expected = rows_of(spark, sql.format(A=ref["A"], B=ref["B"], C=ref["C"]))
    assert len(expected) > 100, expected[:3]
    result = join_in_session(spark, cat, sql.format(A="A", B="F", C="G"), {n: WIDE_DAYS for n in "AFG"})
    df = spark.sql(sql.format(A="A", B="F", C="G"))
    assert sorted(map(tuple, df.collect()), key=repr) == expected
    physical = final_plan(df._jdf.queryExecution().executedPlan().toString())
    assert len(result["joins"]) == 2 and all(j["colocate"] for j in result["joins"]), result["joins"]
    assert "Exchange" not in physical, physical
    for group, k in (("g_fine16", 2), ("g_fine32", 4)):
        assert f"group 1_{group} was created at {8 * k} buckets and is read at 8: task b reads its {k} buckets" in \
            result["explain"], result["explain"]
    assert "may read remotely" in result["explain"]


def test_an_ordered_read_joins_a_coalesced_one_and_the_guard_checks_the_finer_bucket(spark, lake, created_finer,
                                                                                     tmp_path):
    """On a day A holds one sorted file per bucket, A's side is read in order (no sort) while G's
    coalesced side is sorted by Spark (several buckets a task); the columnar merge join, which
    needs ordered reads on both sides, leaves this join to Spark's, and the rows are plain Spark's.
    The guard checks G's rows against G's own 32 buckets: bucket 11's file put in bucket 19's
    directory is of the right task (both are read in task 3) but the wrong bucket, and stops the
    query naming both."""
    from dataclasses import replace

    from airflow_colocate.core.errors import ColocateError
    from airflow_colocate.jobs.join import prepare_join
    from airflow_colocate.spark.join_job import run_join

    cat, day = created_finer, WIDE_DAYS[0]
    sql = "SELECT t1.id, t1.name, t6.ord_id FROM {A} t1 JOIN {C} t6 ON t1.dt = t6.dt AND t1.id = t6.id"
    expected = rows_of(spark, sql.format(A=f"(SELECT * FROM ref_A WHERE dt = DATE'{day}')", C="ref_C"))
    result = join_in_session(spark, cat, sql.format(A="A", C="G"), {"A": [day], "G": [day]}, hash_budget=0)
    df = spark.sql(sql.format(A="A", C="G"))
    assert sorted(map(tuple, df.collect()), key=repr) == expected and expected
    physical = final_plan(df._jdf.queryExecution().executedPlan().toString())
    (j,) = result["joins"]
    assert j["colocate"] and "Exchange" not in physical, physical
    assert physical.count("ColocateOrderedBucket [") == 1 and physical.count("Sort [") == 1, physical
    assert "ColumnarMergeJoin" not in physical, physical

    plan, _ = prepare_join(cat, sql.format(A="A", C="G"), {"A": [day], "G": [day]}, work_dir=tmp_path)
    table = next(t for t in plan.tables if t.name == "G")
    assert table.read_buckets == 8 and table.bucket_num == 32
    (part,) = table.partitions
    src, other = (Path(part.bucket_paths[b].removeprefix("file://")) for b in (19, 11))
    dst = tmp_path / "tampered" / src.name
    shutil.copytree(src, dst)
    (mine,) = [p for p in dst.iterdir() if p.suffix == ".parquet"]
    (theirs,) = [p for p in other.iterdir() if p.suffix == ".parquet"]
    shutil.copy(theirs, mine)
    paths = list(part.bucket_paths)
    paths[19] = dst.as_uri()
    tampered = replace(table, partitions=[replace(part, bucket_paths=paths, candidates=[])])
    plan = replace(plan, tables=[tampered if t is table else t for t in plan.tables])
    with pytest.raises(ColocateError, match=r"colocate: table default\.G partition \S+ bucket 19 .*holds a row of "
                                            r"bucket 11"):
        run_join(spark, plan)


def test_a_group_whose_count_does_not_divide_shuffles_with_the_reason(spark, lake):
    """E's group was created at 12 buckets: 12 and 8 do not divide one another, so Spark's bucket
    ids do not nest and the join cannot be done bucket by bucket; it shuffles, right, and says why."""
    cat, root = lake
    cat.tables.create("E", parse_columns(SCHEMA["C"]), ["id"], bucket_num=12, replication_num=2,
                      partition_cols=["dt"], colocate_with="g_odd")
    write_in_session(spark, cat, "E", DAYS[9], Source(query=source("C", 9)), work_dir=root / "runs")
    sql = "SELECT t1.id, t6.ord_id FROM {A} t1 JOIN {C} t6 ON t1.dt = t6.dt AND t1.id = t6.id"
    expected = rows_of(spark, sql.format(A="ref_A", C=f"(SELECT * FROM ref_C WHERE dt = DATE'{DAYS[9]}')"))
    result = join_in_session(spark, cat, sql.format(A="A", C="E"), {"A": DAYS[9:], "E": DAYS[9:]})
    assert rows_of(spark, sql.format(A="A", C="E")) == expected
    (j,) = result["joins"]
    assert not j["colocate"] and "whose map has 12 buckets, not 8" in j["reason"], j
    assert "divide one another" in j["reason"] and "keeps its map's count" in j["reason"], j


def test_verify_passes_on_both_layouts_and_checks_each_files_finer_bucket(spark, lake):
    """verify re-hashes and row-checks every replica of both layouts (the 16- and 32-bucket files
    against the finer bucket their names carry); a file whose rows are of its family but not of
    the finer bucket it names (what the join's guard at the family's count cannot see) is bad."""
    cat, _ = lake
    summary = verify(cat, session_runner(spark), group="g_seeds")
    assert summary["bad"] == [] and summary["replicas"] == 3 * 10 * 8 * 2 and summary["rows"] > 0, summary
    assert verify(cat, session_runner(spark), group="g_wide")["bad"] == []
    name = "part-00000-w_00003.s{:05d}.c000.snappy.parquet"
    check = RowCheck(replica_id=1, path="file:///x", partition="d", bucket_seq=3, rows=10, layout_buckets=16)
    assert judge(check, {(name.format(3), 3): 6, (name.format(11), 11): 4}, "db.t", 8).ok
    mixed = judge(check, {(name.format(3), 3): 6, (name.format(3), 11): 4}, "db.t", 8)
    assert not mixed.ok and mixed.wrong == 4 and "not of the bucket their file names in the layout of 16" in mixed.error
    stray = judge(check, {(name.format(3), 3): 6, (name.format(11), 5): 4}, "db.t", 8)
    assert not stray.ok and "belong to other buckets (4 of bucket 5)" in stray.error


def test_split_refuses_bad_input_before_any_effect(lake):
    cat, _ = lake
    before = cat.groups.get("g_seeds")
    for factor, words in ((1, "at least 2"), (0, "at least 2"), (True, "at least 2"), ("2", "at least 2"),
                          (8192, "exceeds the maximum bucket count 65536; give a factor of at most 4096")):
        with pytest.raises(InvalidArgument, match=words):
            cat.groups.split("g_seeds", factor)
    with pytest.raises(Exception, match="g_nope"):
        cat.groups.split("g_nope", 2)
    assert cat.groups.get("g_seeds") == before


def test_repair_after_a_lost_backend_restores_both_layouts(spark, lake):
    """be1's disk is lost and the backend down; a repair (relocate now) clones whole bucket
    families, files of both layouts as they are, from the surviving replicas. The groups are
    stable and whole again and verify proves every replica of both layouts. (The module's last
    test but one: the guard's test below reads whichever replicas are left.)"""
    from datetime import timedelta

    from airflow_colocate.jobs.balance import BalanceOptions, Balancer
    from airflow_colocate.jobs.runners import local_runner

    cat, root = lake
    shutil.rmtree(root / "backends" / "be1" / "default")
    cat.backends.set_state("be1", "down", reason="disk lost")
    summary = Balancer(cat, local_runner(), BalanceOptions(relocate_now=True, grace=timedelta(0)),
                       work_dir=root / "runs", echo=lambda _: None).run()
    assert {j.group for j in summary["jobs"]} >= {"1_g_seeds", "1_g_wide"}, summary
    assert all(j.state == "done" for j in summary["jobs"]), summary
    be1 = next(b.id for b in cat.backends.list() if b.name == "be1")
    for group in ("g_seeds", "g_wide"):
        assert all(be1 not in row and len(row) == 2 for row in cat.groups.get(group).bucket_map)
        assert cat.health.check_group(group).stable
    moved = sorted((root / "backends").glob(f"be[23]/default/A_*/{DAYS[9]}/v000001/b*/*.s*.parquet"))
    assert len(moved) == 2 * 16, moved  # every finer bucket of the 16-bucket day, on both replicas
    # every replica's files re-hashed against the catalog and every row's family and finer bucket
    summary = verify(cat, session_runner(spark), group="g_seeds")
    assert summary["bad"] == [] and summary["replicas"] == 3 * 10 * 8 * 2, summary


def test_the_guard_stops_a_split_file_of_another_family(spark, lake, tmp_path):
    """The read's guard checks pmod(hash, 8) against the family a directory is registered as, for
    both layouts: a 16-bucket file whose rows are of another family (here bucket 3's file holding
    bucket 4's rows, under bucket 3's name) stops the query instead of joining them silently."""
    from dataclasses import replace

    from airflow_colocate.core.errors import ColocateError
    from airflow_colocate.jobs.join import prepare_join
    from airflow_colocate.spark.join_job import run_join

    cat, _ = lake
    sql = SQL1.format(A="A", B="B", C="C")
    plan, _ = prepare_join(cat, sql, {n: DAYS[9:] for n in "ABC"}, work_dir=tmp_path)
    table = next(t for t in plan.tables if t.name == "A")
    (part,) = table.partitions
    src, other = (Path(part.bucket_paths[b].removeprefix("file://")) for b in (3, 4))
    dst = tmp_path / "tampered" / src.name
    shutil.copytree(src, dst)
    mine = next(p for p in dst.iterdir() if layout.layout_bucket_of(p.name) == 11)
    theirs = next(p for p in other.iterdir() if layout.layout_bucket_of(p.name) == 12)
    shutil.copy(theirs, mine)
    paths = list(part.bucket_paths)
    paths[3] = dst.as_uri()
    tampered = replace(table, partitions=[replace(part, bucket_paths=paths, candidates=[])])
    plan = replace(plan, tables=[tampered if t is table else t for t in plan.tables])
    with pytest.raises(ColocateError, match=r"colocate: table default\.A partition \S+ bucket 3 .*holds a row of "
                                            r"bucket 4"):
        run_join(spark, plan)
