"""The bucket-level hash join (issue 15): the join job hints SHUFFLE_HASH on the tables whose every
bucket fits the budget, from the catalog's sizes. A large budget gives a shuffled hash join with no
Exchange and no Sort, a tiny one the sort-merge join; both return plain Spark's rows for every join
type, and the explain says which and why. Where each bucket's files are read in key order (the
jar's ordered read, tests/joins/test_ordered_read.py), the sort-merge join sorts nothing and is
chosen over the hash join even when the build side fits; these tests turn the ordered read off
(``spark.colocate.sortedScan=false``) to see the budget's choice alone, and check both."""

from __future__ import annotations

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable, Source
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.core.sizes import parse_size
from airflow_colocate.planner.join import bucket_facts, build_estimate
from airflow_colocate.spark.bucket_join import choose_bucket_join, default_hash_budget, hash_pays_off, packs_into_long
from airflow_colocate.spark.physical_plan import final_plan
from colocate_testing import add_local_backends

pytestmark = pytest.mark.spark

DAYS = ["2026-11-01"]
TABLES = {"ha": DAYS, "hb": DAYS}
KINDS = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN",
         "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN"}
# ha: one row per key 0..599 of the day; hb: three rows per even key 0..799 (keys on one side only both ways)
SOURCES = {"ha": "SELECT id AS k, concat('a', id + {d}) AS v FROM range(600)",
           "hb": "SELECT k, w FROM (SELECT 2 * (id % 400) AS k, id + {d} AS w FROM range(1200))"}


@pytest.fixture
def resort(spark):
    """Spark sorts each bucket again, as without the jar: the budget alone decides."""
    spark.conf.set("spark.colocate.sortedScan", "false")
    yield
    spark.conf.unset("spark.colocate.sortedScan")


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hashjoin")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends", n=2)
    for name, cols in (("ha", "k bigint, v string, dt date"), ("hb", "k bigint, w bigint, dt date")):
        cat.tables.create(name, parse_columns(cols), ["k"], bucket_num=4, replication_num=1, partition_cols=["dt"],
                         colocate_with="g_hash")
        for d, day in enumerate(DAYS):
            write_in_session(spark, cat, name, day, Source(query=SOURCES[name].format(d=d)), work_dir=root / "runs")
            spark.sql(SOURCES[name].format(d=d)).selectExpr("*", f"DATE'{day}' AS dt").createOrReplaceTempView(f"ref_{name}_{d}")
        spark.sql(f"SELECT * FROM ref_{name}_0").createOrReplaceTempView(f"ref_{name}")
    yield cat
    cat.dispose()


def query(kind: str, a: str = "ha", b: str = "hb", on: str = "x.k = y.k") -> str:
    """Joined on the bigint key alone (one day is registered): keys Spark packs into one long, so a
    build side that fits is hashed. ``on="x.dt = y.dt AND x.k = y.k"``: a date and a bigint."""
    cols = "x.dt, x.k, x.v" + ("" if kind in ("semi", "anti") else ", y.k AS yk, y.w")
    return f"SELECT {cols} FROM {a} x {KINDS[kind]} {b} y ON {on} AND y.w % 3 <> 1"


@pytest.mark.parametrize("kind", list(KINDS))
def test_hash_or_sort_merge_by_budget_same_rows(spark, lake, kind):
    expected = sorted(map(tuple, spark.sql(query(kind, "ref_ha", "ref_hb")).collect()), key=repr)
    assert expected
    for budget, ordered in (("1g", False), (1, False), ("1g", True), (1, True)):
        spark.conf.set("spark.colocate.sortedScan", str(ordered).lower())
        try:
            result = join_in_session(spark, lake, query(kind), TABLES, hash_budget=budget)
            mine = spark.sql(query(kind))
            rows = sorted(map(tuple, mine.collect()), key=repr)
            physical = final_plan(mine._jdf.queryExecution().executedPlan().toString())  # after the run
        finally:
            spark.conf.unset("spark.colocate.sortedScan")
        assert rows == expected and result["rows"] == len(expected)
        (j,) = result["joins"]
        assert j["colocate"] and j["exchanges_left"] == j["exchanges_right"] == 0 and "Exchange" not in physical, j
        choice = result["bucket_join"]
        if ordered:
            # the build side fits or not: the sort-merge join over buckets read in order, no sort
            assert choice["method"] == "sort-merge" and choice["build_tables"] == []
            # ... which the jar's columnar merge join runs by default (spark.colocate.join.columnar=auto),
            # for every join type but the full outer join, which keeps Spark's
            node = "SortMergeJoin" if kind == "full" else "ColocateColumnarMergeJoin"
            assert node in physical and physical.count("ColocateOrderedBucket [") == 2, physical
            assert "Sort [" not in physical
            assert "bucket reads: 2 in key order (no sort, order checked per row), 0 sorted by Spark" in result["explain"]
            if budget == "1g":
                assert (" of 1024 MiB budget fits, but each bucket's files are sorted by the key and read in order, "
                        "so the sort-merge join sorts nothing") in result["explain"]
        elif budget == 1:
            assert choice["method"] == "sort-merge" and choice["build_tables"] == []
            assert j["method"] == "sort-merge" and "SortMergeJoin" in physical and "Sort [" in physical
            assert "bucket join: sort-merge (smallest table's largest bucket (ha) " in result["explain"]
            assert "exceeds the 1 B budget)" in result["explain"]
            assert "bucket reads: 0 in key order (no sort, order checked per row), 2 sorted by Spark" in result["explain"]
        else:
            assert choice["method"] == "hash" and choice["build_tables"] == ["ha", "hb"]
            assert all(0 < size <= parse_size("1g", "") for size in choice["largest_bucket"].values())
            assert j["method"] == "hash" and j["build"], j
            assert "ShuffledHashJoin" in physical and "Sort [" not in physical
            assert "bucket join: hash (largest build bucket " in result["explain"]
            assert " of 1024 MiB budget)" in result["explain"]


def test_budget_between_the_tables_hints_only_the_smaller(spark, lake, resort):
    """ha's buckets fit, hb's do not: an inner join builds ha; a semi join may only build its
    right side (hb), which does not fit, so it stays sort-merge."""
    sizes = join_in_session(spark, lake, query("inner"), TABLES, hash_budget="1g")["bucket_join"]["largest_bucket"]
    budget = (sizes["ha"] + sizes["hb"]) // 2
    assert sizes["ha"] <= budget < sizes["hb"]
    for kind, method in (("inner", "hash"), ("semi", "sort-merge")):
        result = join_in_session(spark, lake, query(kind), TABLES, hash_budget=budget)
        assert result["bucket_join"]["build_tables"] == ["ha"]
        (j,) = result["joins"]
        assert j["method"] == method and j["colocate"], j
        assert j["build"] == (["ha"] if method == "hash" else [])
        assert result["rows"] == spark.sql(query(kind, "ref_ha", "ref_hb")).count()


def test_keys_that_do_not_pack_hash_only_a_query_that_stops_early(spark, lake, resort):
    """(dt, k) is a date and a bigint: Spark would hash them with its generic map, slower than the
    sort-merge join for a query that reads every row, so the build side fitting is not enough; a
    LIMIT above the join streams, and there the hash join wins (spark.bucket_join.hash_pays_off)."""
    wide = query("inner", on="x.dt = y.dt AND x.k = y.k")
    expected = spark.sql(query("inner", "ref_ha", "ref_hb", on="x.dt = y.dt AND x.k = y.k")).count()
    result = join_in_session(spark, lake, wide, TABLES, hash_budget="1g")
    (j,) = result["joins"]
    assert result["rows"] == expected and j["colocate"] and j["method"] == "sort-merge", j
    assert result["bucket_join"]["method"] == "sort-merge" and result["bucket_join"]["build_tables"] == []
    assert ("bucket join: sort-merge (largest build bucket " in result["explain"]
            and " of 1024 MiB budget fits, but the join keys (date, bigint) do not pack into one long and the query "
                "reads every row" in result["explain"]), result["explain"]
    for limited in (f"{wide} LIMIT 50", f"SELECT * FROM ({wide}) LIMIT 50", f"SELECT upper(v) FROM ({wide}) LIMIT 50"):
        result = join_in_session(spark, lake, limited, TABLES, hash_budget="1g")
        (j,) = result["joins"]
        assert result["rows"] == 50 and j["method"] == "hash" and result["bucket_join"]["build_tables"] == ["ha", "hb"]
    for full in (f"{wide} ORDER BY x.k LIMIT 50", f"SELECT count(*) FROM ({wide}) LIMIT 50"):
        (j,) = join_in_session(spark, lake, full, TABLES, hash_budget="1g")["joins"]
        assert j["method"] == "sort-merge", (full, j)
    # read from the parsed query: a key that is an expression has no known type, so no hash join
    expression = query("inner", on="x.dt = y.dt AND x.k + 0 = y.k")
    result = join_in_session(spark, lake, expression, TABLES, hash_budget="1g")
    assert result["bucket_join"]["method"] == "sort-merge" and "keys (date, unknown)" in result["explain"]
    assert result["rows"] == spark.sql(query("inner", "ref_ha", "ref_hb", on="x.dt = y.dt AND x.k + 0 = y.k")).count()


def test_which_keys_pack_into_one_long():
    assert packs_into_long(["bigint"]) and packs_into_long(["int", "int"]) and packs_into_long(["smallint", "int", "tinyint"])
    assert not packs_into_long(["date", "bigint"]) and not packs_into_long(["bigint", "int"])
    assert not packs_into_long(["string"]) and not packs_into_long([None]) and not packs_into_long([])
    assert hash_pays_off([["bigint"], ["int", "int"]], streams=False) is None
    assert hash_pays_off([["date", "bigint"]], streams=True) is None
    assert "(date, bigint) do not pack" in hash_pays_off([["bigint"], ["date", "bigint"]], streams=False)
    assert "(unknown) do not pack" in hash_pays_off([[None]], streams=False)


def test_budget_formula_and_sizes():
    # (1 GiB - 300 MiB) x 0.6 x 0.5 / 2 cores
    assert default_hash_budget("1g", 2) == int((1024 - 300) * (1 << 20) * 0.6 * 0.5 / 2)
    assert parse_size("512m", "x") == 512 << 20 and parse_size("512MiB", "x") == 512 << 20 and parse_size(7, "x") == 7
    with pytest.raises(InvalidArgument, match="hash_budget 'lots' is not a size"):
        parse_size("lots", "hash_budget")


def test_choice_sums_each_bucket_over_the_partitions_read():
    """A bucketed scan reads bucket b of every partition in one task: the build side is their sum."""
    def table(name, per_day):
        parts = [ReadPartition(value=f"d{i}", bucket_paths=[f"/p{i}/{b}" if n else "" for b, n in enumerate(sizes)],
                               candidates=[[ReadReplica(replica_id=0, backend_id=1, path="", bytes=n, rows=n // 10)]
                                           for n in sizes]) for i, sizes in enumerate(per_day)]
        return ReadTable(name=name, columns=[["k", "bigint"]], dist_cols=["k"], partition_cols=["dt"], bucket_num=2,
                         partitions=parts)
    small = table("small", [[100, 0], [100, 50]])  # bucket 0: 200 bytes over two days
    big = table("big", [[1000, 10], [10, 1000]])
    fits_small = build_estimate(200, 20)
    choice = choose_bucket_join(bucket_facts([big, small]), fits_small, "test")
    assert choice.method == "hash" and choice.build_tables == ["small"]
    assert choice.largest_bucket == {"small": fits_small, "big": build_estimate(1010, 101)}
    assert choice_of(choose_bucket_join(bucket_facts([big, small]), fits_small - 1)) == ("sort-merge", [])
    assert choice_of(choose_bucket_join(bucket_facts([big, small]), 0)) == ("sort-merge", [])


def choice_of(c):
    return c.method, c.build_tables
