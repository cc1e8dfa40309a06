"""Issue 28: a colocation group whose tables change columns while it lives, and whose partitions
are dropped, recovered and expired.

Three tables of the seeds' shape over ten daily partitions. After day 5: A gains a column (through
a write with ``schema_evolution="add_columns"``) and has ``second_id`` widened int -> bigint, B gains
a column through ``colocate table alter``, C loses one. Days 6-10 are written with the new schema.
The seeds' SQL1 and SQL2 over all ten days stay colocated (no Exchange, buckets read in key order,
the row guard and page checksums on) and return exactly what plain Spark returns reading the same
replica files with the same schema (old files: the new column null, the widened one as bigint,
the dropped one gone)."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import SchemaMismatch
from airflow_colocate.jobs.join import join_in_session, prepare_join
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark import locality
from airflow_colocate.spark.join_job import run_join
from airflow_colocate.spark.physical_plan import final_plan
from colocate_testing import add_local_backends

pytestmark = pytest.mark.spark

DAYS = [(date(2026, 10, 1) + timedelta(days=i)).isoformat() for i in range(10)]
ROWS = 150  # a day: SQL2's LIMIT 10000 never bites, so its rows compare exactly
ID = "pmod(k * 2654435761, 1099511627776)"
V1 = {  # the sources of days 1-5
    "A": f"SELECT {ID} AS id, concat('name_', k) AS name, int(k % 1000) AS second_id, concat('s', k % 7) AS second_name",
    "B": f"SELECT {ID} AS id, timestamp_seconds(1790000000 + k) AS weight_time, concat('[', k % 7, ']') AS list",
    "C": f"SELECT {ID} AS id, k * 3 AS ord_id, concat('c', k) AS _id, concat('note', k) AS note",
}
V2 = {  # days 6-10: A has region and a bigint second_id, B has tag, C no note
    "A": f"SELECT {ID} AS id, concat('name_', k) AS name, k * 4294967296 AS second_id, concat('s', k % 7) AS second_name, "
         f"concat('r', k % 3) AS region",
    "B": f"SELECT {ID} AS id, timestamp_seconds(1790000000 + k) AS weight_time, concat('[', k % 7, ']') AS list, "
         f"concat('t', k % 5) AS tag",
    "C": f"SELECT {ID} AS id, k * 3 AS ord_id, concat('c', k) AS _id",
}
SCHEMA = {
    "A": "id bigint, name string, second_id int, second_name string, dt date",
    "B": "id bigint, weight_time timestamp, list string, dt date",
    "C": "id bigint, ord_id bigint, _id string, note string, dt date",
}
ALL_DAYS = ", ".join(f"DATE'{d}'" for d in DAYS)
SQL1 = ("SELECT count(*) AS n FROM {A} t1 JOIN {B} t5 ON t1.dt = t5.dt AND t1.id = t5.id "
        f"JOIN {{C}} t6 ON t1.dt = t6.dt AND t1.id = t6.id WHERE t1.dt IN ({ALL_DAYS})")
SQL2 = ("SELECT t1.dt, t1.id, t1.name, t1.second_id, t1.second_name, t1.region, t5.id AS id5, t5.weight_time, "
        "t5.list, t5.tag, t6.ord_id, t6._id FROM {A} t1 JOIN {B} t5 ON t1.dt = t5.dt AND t1.id = t5.id "
        f"JOIN {{C}} t6 ON t1.dt = t6.dt AND t1.id = t6.id WHERE t1.dt IN ({ALL_DAYS}) LIMIT 10000")


def source(sql: str, day_index: int) -> Source:
    # every day its own keys (a join matches within a day), overlapping in part with the next day's
    return Source(query=f"{sql} FROM (SELECT id + {day_index * 100} AS k FROM range({ROWS}))")


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    from airflow_colocate.core.sqltypes import parse_columns

    if not locality.ordered_read(spark):
        pytest.fail("the session does not load colocate.ordered.ColocateExtensions: build the jar (scripts/setup.sh)")
    root = tmp_path_factory.mktemp("evolve")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends", n=2)
    for t in "ABC":
        cat.tables.create(t, parse_columns(SCHEMA[t]), ["id"], bucket_num=4, replication_num=1, partition_cols=["dt"],
                          colocate_with="g_evolve")
    for i, day in enumerate(DAYS[:5]):
        for t in "ABC":
            write_in_session(spark, cat, t, day, source(V1[t], i), work_dir=root / "runs")
    yield cat, root
    cat.dispose()


@pytest.fixture(scope="module")
def evolved(spark, lake):
    """Day 5's changes, then days 6-10 with the new schema."""
    cat, root = lake
    before = {g: cat.groups.get(g).bucket_map for g in ("g_evolve",)}
    # A source with a column the table lacks is refused, naming the alter that accepts it.
    with pytest.raises(SchemaMismatch) as refused:
        write_in_session(spark, cat, "A", DAYS[5], source(V2["A"], 5), work_dir=root / "runs")
    assert "'colocate table alter default.A --add-column 'region string'' accepts it" in str(refused.value)
    cat.schemas.alter("A", widen=["second_id bigint"])
    cat.schemas.alter("B", add=["tag string"])
    cat.schemas.alter("C", drop=["note"])
    result = write_in_session(spark, cat, "A", DAYS[5], source(V2["A"], 5), work_dir=root / "runs",
                              schema_evolution="add_columns")
    assert result["added_columns"] == [["region", "string"]]
    for t in "BC":
        write_in_session(spark, cat, t, DAYS[5], source(V2[t], 5), work_dir=root / "runs")
    for i, day in enumerate(DAYS[6:], start=6):
        for t in "ABC":
            write_in_session(spark, cat, t, day, source(V2[t], i), work_dir=root / "runs")
    assert {g: cat.groups.get(g).bucket_map for g in before} == before  # a schema version moves nothing
    assert cat.health.check_group("g_evolve").stable
    return cat


def plain_views(spark, cat: Catalog, prefix: str = "ref_") -> None:
    """Every committed replica file of each table read by plain Spark with the table's current
    schema (dt from the partition value): the reference answer."""
    from pyspark.sql import functions as F

    for t in "ABC":
        view, parts = cat.reads.replicas(t)
        data = ", ".join(f"`{n}` {ty}" for n, ty in view.columns if n != "dt")
        frames = [spark.read.schema(data).parquet(*[b[0].path for b in p.buckets if b]).withColumn("dt", F.lit(p.value).cast("date"))
                  for p in parts]
        df = frames[0]
        for f in frames[1:]:
            df = df.unionByName(f)
        df.createOrReplaceTempView(f"{prefix}{t}")


def run(spark, cat, sql: str, days=None):
    result = join_in_session(spark, cat, sql.format(A="A", B="B", C="C"), {t: days for t in "ABC"})
    df = spark.sql(sql.format(A="A", B="B", C="C"))
    return result, Counter(map(tuple, df.collect())), final_plan(df._jdf.queryExecution().executedPlan().toString())


def test_seeds_queries_across_schema_versions(spark, evolved):
    cat = evolved
    assert [n for n, _ in cat.tables.get("A").columns] == ["id", "name", "second_id", "second_name", "dt", "region"]
    assert cat.tables.get("C").schema_version == 2 and cat.tables.get("A").schema_version == 3
    plain_views(spark, cat)
    for sql in (SQL1, SQL2):
        result, rows, physical = run(spark, cat, sql)
        expected = Counter(map(tuple, spark.sql(sql.format(A="ref_A", B="ref_B", C="ref_C")).collect()))
        assert rows == expected and sum(expected.values()) == result["rows"]
        assert result["colocate"] is True and len(result["joins"]) == 2, result["explain"]
        for j in result["joins"]:  # no Exchange under either join (SQL1's count gathers one row per task)
            assert j["colocate"] and j["exchanges_left"] == j["exchanges_right"] == 0, j
        assert "Exchange hashpartitioning" not in physical, physical
        assert "in key order" in result["explain"], result["explain"]
    n = spark.sql(SQL1.format(A="A", B="B", C="C")).collect()[0][0]
    assert n == 10 * ROWS  # every key of every day joins
    rows = spark.sql(SQL2.format(A="A", B="B", C="C")).collect()
    old = [r for r in rows if r.dt.isoformat() <= DAYS[4]]
    new = [r for r in rows if r.dt.isoformat() > DAYS[4]]
    assert len(old) == len(new) == 5 * ROWS
    assert all(r.region is None and r.tag is None for r in old)  # written before the columns existed
    assert all(r.region.startswith("r") and r.tag.startswith("t") for r in new)
    assert max(r.second_id for r in new) > 2 ** 31 and all(0 <= r.second_id < 1000 for r in old)  # widened, old files too
    assert "note" not in spark.table("C").columns  # the dropped column is gone from every read
    assert dict(spark.table("A").dtypes)["second_id"] == "bigint"


def test_drop_recover_and_a_read_started_before_the_drop(spark, evolved, tmp_path):
    cat = evolved
    before = run(spark, cat, SQL2)[1]
    cat.partitions.drop("B", DAYS[2])
    result, rows, physical = run(spark, cat, SQL2)
    assert DAYS[2] not in {r[0].isoformat() for r in rows} and result["colocate"]
    assert "Exchange hashpartitioning" not in physical
    assert rows == Counter({r: c for r, c in before.items() if r[0].isoformat() != DAYS[2]})
    cat.partitions.recover("B", DAYS[2])
    assert run(spark, cat, SQL2)[1] == before  # identical rows

    # A read planned before a drop (and a purge, and gc within its grace) still reads its rows.
    sql = SQL1.format(A="A", B="B", C="C")
    plan, _ = prepare_join(cat, sql, {t: None for t in "ABC"})
    paths = [b[0].path for p in cat.reads.replicas("C", [DAYS[3]])[1] for b in p.buckets if b]
    cat.partitions.drop("C", DAYS[3], force=True)
    gc(cat, grace=timedelta(hours=1))
    assert all(_exists(p) for p in paths)
    report = run_join(spark, plan)
    assert report.rows == 1 and spark.sql(sql).collect()[0][0] == 10 * ROWS
    assert spark.sql(SQL1.format(A="A", B="B", C="C")).collect()  # still registered from the old plan
    gc(cat, grace=timedelta(seconds=0))  # past the grace: the files of the purged version are erased
    assert not any(_exists(p) for p in paths)
    result, rows, _ = run(spark, cat, SQL1)
    assert list(rows) == [(9 * ROWS,)]


def gc(cat: Catalog, *, grace: timedelta) -> None:
    from airflow_colocate.storage import fs

    items = cat.writes.garbage(grace=grace)
    for item in items:
        fs.delete_tree(item.uri)
    cat.writes.forget_garbage(items)


def _exists(uri: str) -> bool:
    from pathlib import Path
    return Path(uri.removeprefix("file://")).exists()
