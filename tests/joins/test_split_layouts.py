"""Bucket counts in multiples (issue 45, points 2 and 3): a group split from 8 to 16 buckets keeps
its old partitions at 8 and writes new ones at 16, each finer bucket j as its own file in the
directory of bucket j mod 8 (Spark's pmod(h, 16) mod 8 = pmod(h, 8)). The seeds' SQL1 and SQL2 over
ten days of both layouts stay colocated with no Exchange and return plain Spark's rows; so does a
join with a group written at 32 buckets; verify proves the finer bucket of every file; a repair
after a lost backend restores both layouts."""

from __future__ import annotations

import datetime as dt
import shutil

import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import Conflict, InvalidArgument
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session
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


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """A, B, C in g_seeds (8 buckets, 2 replicas, 3 backends): days 1-5 written at 8 buckets, then
    the group split by 2 and days 6-10 written at 16. D in g_wide, created at 8 and split by 4
    before its first write: every day at 32 buckets."""
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
    refs: dict[str, list[str]] = {n: [] for n in "ABCD"}
    for d, day in enumerate(DAYS):
        if d == 5:
            cat.groups.split("g_seeds", 2)
        for name in "ABCD":
            sql = source("C" if name == "D" else name, d)
            write_in_session(spark, cat, name, day, Source(query=sql), work_dir=root / "runs")
            refs[name].append(f"SELECT *, DATE'{day}' AS dt FROM ({sql})")
    for name, parts in refs.items():
        spark.sql(" UNION ALL ".join(parts)).createOrReplaceTempView(f"ref_{name}")
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
    for d in (DAYS[0], DAYS[9]):
        (bdir,) = sorted((root / "backends").glob(f"be*/default/A_*/{d}/v000001/b00003"))[:1]
        files[d] = sorted(p.name for p in bdir.iterdir() if p.suffix == ".parquet")
    assert [layout.layout_bucket_of(n) for n in files[DAYS[0]]] == [None]
    assert [layout.layout_bucket_of(n) for n in files[DAYS[9]]] == [3, 11]
    for n in files[DAYS[9]]:  # Spark's bucket id in the name is still the map bucket
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
    result = join_in_session(spark, cat, sql.format(A="A", C="D"), {"A": DAYS, "D": DAYS})
    df = spark.sql(sql.format(A="A", C="D"))
    assert sorted(map(tuple, df.collect()), key=repr) == expected
    physical = final_plan(df._jdf.queryExecution().executedPlan().toString())
    (j,) = result["joins"]
    assert j["colocate"], j
    assert "Exchange" not in physical, physical


def test_verify_checks_every_file_against_its_layout(spark, lake, tmp_path):
    """verify passes on both layouts; a file of the 16-bucket layout rewritten with another finer
    bucket's rows of the same family (which the join's guard cannot see) is found by verify."""
    cat, root = lake
    from airflow_colocate.jobs.verify import verify

    report = verify(spark, cat, ["A", "D"], rows=True)
    assert report.bad == [] and report.checked > 0, report
    (bdir,) = sorted((root / "backends").glob(f"be*/default/C_*/{DAYS[7]}/v000001/b00002"))[:1]
    low, high = sorted(p for p in bdir.iterdir() if p.suffix == ".parquet")
    saved = tmp_path / "saved"
    shutil.copytree(bdir, saved)
    try:
        a, b = pq.read_table(low), pq.read_table(high)
        # the same bytes count does not matter here: verify's row check reads the rows
        pq.write_table(b, low)
        pq.write_table(a, high)
        bad = verify(spark, cat, ["C"], rows=True, partitions=[DAYS[7]]).bad
        assert bad and all("bucket 2" in b.reason or "layout" in b.reason for b in bad), bad
    finally:
        for p in saved.iterdir():
            shutil.copy(p, bdir / p.name)


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
