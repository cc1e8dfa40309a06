"""Schema versions in the catalog: each change is a version and an event, no placement changes,
and every refusal is one line that leaves the catalog as it was (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from colocate_testing import add_local_backends
from test_incremental import Clock, write

from airflow_colocate.catalog import Catalog, summary
from airflow_colocate.catalog.schemas import widening
from airflow_colocate.core.errors import ColocateError, SchemaMismatch

COLUMNS = [("id", "bigint"), ("qty", "int"), ("price", "decimal(10,2)"), ("ratio", "float"), ("day", "date"),
           ("note", "string"), ("dt", "date")]


@pytest.fixture
def cat(catalog_url, tmp_path):
    c = Catalog(catalog_url, actor="pytest", clock=Clock())
    c.init()
    add_local_backends(c, tmp_path / "backends", n=2)
    c.tables.create("t", COLUMNS, ["id"], bucket_num=2, replication_num=1, partition_cols=["dt"], colocate_with="g")
    write(c, "t", "2026-11-01")
    yield c
    c.dispose()


def snapshot(c: Catalog):
    return c.tables.get("t"), c.schemas.history("t"), c.groups.get("g").bucket_map, len(c.events(limit=10000))


def test_each_change_is_a_version_and_an_event_and_moves_nothing(cat):
    before_map = cat.groups.get("g").bucket_map
    t = cat.schemas.alter("t", add=["discount double"])
    assert t.schema_version == 2 and t.columns[-1] == ("discount", "double")
    t = cat.schemas.alter("t", widen=[("qty", "bigint"), ("price", "decimal(14,2)"), ("ratio", "double"),
                                      ("day", "timestamp_ntz")])
    t = cat.schemas.alter("t", drop=["note"])
    assert t.schema_version == 4
    assert [n for n, _ in t.columns] == ["id", "qty", "price", "ratio", "day", "dt", "discount"]
    assert dict(t.columns)["qty"] == "bigint" and dict(t.columns)["day"] == "timestamp_ntz"
    history = cat.schemas.history("t")
    assert [h.version for h in history] == [1, 2, 3, 4]
    assert history[0].columns == tuple(COLUMNS) and history[0].change == ()
    assert history[3].change == ({"op": "drop", "column": "note", "old": "string"},)
    assert [e.kind for e in cat.events(limit=3, kind="table.alter_schema")] == ["table.alter_schema"] * 3
    assert cat.groups.get("g").bucket_map == before_map
    assert cat.reads.replicas("t")[1][0].version == 1  # no file rewritten, no new partition version
    assert cat.tx(summary.drift) == []


@pytest.mark.parametrize("change, words", [
    (dict(drop=["id"]), "distribution column, which the colocation group schema fixes"),
    (dict(widen=[("dt", "timestamp_ntz")]), "partition column, which the colocation group schema fixes"),
    (dict(widen=[("id", "decimal(30,0)")]), "distribution column"),
    (dict(widen=[("qty", "smallint")]), "narrowing"),
    (dict(widen=[("price", "decimal(8,2)")]), "narrowing"),
    (dict(widen=[("price", "decimal(12,3)")]), "changes the scale"),
    (dict(widen=[("day", "timestamp")]), "widen to timestamp_ntz"),
    (dict(widen=[("note", "bigint")]), "not a lossless widening"),
    (dict(add=["qty bigint"]), "the column exists"),
    (dict(add=["QTY string"]), "the column exists"),
    (dict(add=["__bucket int"]), "reserved"),
    (dict(drop=["nope"]), "no such column"),
    (dict(add=["c strin"]), "unsupported column type"),
    (dict(), "nothing to change"),
    (dict(add=["c int"], drop=["c"]), "changed twice"),
])
def test_refusals_are_one_line_and_change_nothing(cat, change, words):
    before = snapshot(cat)
    with pytest.raises(ColocateError) as info:
        cat.schemas.alter("t", **change)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert snapshot(cat) == before


def test_last_data_column_and_a_dropped_name_never_come_back(cat):
    cat.tables.create("k", [("id", "bigint"), ("v", "string"), ("dt", "date")], ["id"], bucket_num=2,
                      partition_cols=["dt"], colocate_with="g")
    with pytest.raises(ColocateError, match="last data column"):
        cat.schemas.alter("k", drop=["v"])
    cat.schemas.alter("t", drop=["note"])
    before = snapshot(cat)
    with pytest.raises(ColocateError, match="dropped before.*would reappear"):
        cat.schemas.alter("t", add=["note string"])
    assert snapshot(cat) == before
    with pytest.raises(SchemaMismatch):
        cat.schemas.alter("t", drop=["dt"])


def test_widening_rules():
    assert widening("int", "bigint") is None and widening("tinyint", "int") is None
    assert widening("float", "double") is None and widening("decimal(10,2)", "decimal(38,2)") is None
    assert widening("date", "timestamp_ntz") is None
    assert widening("bigint", "int") and widening("double", "float") and widening("int", "double")
    assert widening("string", "string") == "it is already string"


def test_retention_at_create_and_alter(cat):
    t = cat.tables.create("r", COLUMNS, ["id"], bucket_num=2, partition_cols=["dt"], retention_days=30)
    assert t.retention_days == 30
    assert cat.partitions.set_retention("r", 3).retention_days == 3
    assert cat.partitions.set_retention("r", None).retention_days is None
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ColocateError, match="invalid retention"):
            cat.partitions.set_retention("r", bad)
    with pytest.raises(ColocateError, match="not partitioned"):
        cat.tables.create("u", COLUMNS, ["id"], bucket_num=2, retention_days=3)
    assert [e.kind for e in cat.events(limit=2, kind="table.set_retention")] == ["table.set_retention"] * 2


def test_migration_0005_gives_existing_tables_their_first_version(catalog_url, tmp_path):
    from alembic import command
    from sqlalchemy import create_engine

    from airflow_colocate.catalog.migrate import _config

    c = Catalog(catalog_url, actor="pytest", clock=Clock())
    c.init()
    add_local_backends(c, tmp_path / "backends", n=2)
    c.tables.create("old", COLUMNS, ["id"], bucket_num=2, partition_cols=["dt"], colocate_with="g")
    write(c, "old", "2026-11-01")
    c.dispose()
    cfg = _config()
    plain = create_engine(catalog_url)
    with plain.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0004")
    plain.dispose()
    c = Catalog(catalog_url, actor="pytest", clock=Clock())
    c.init()  # 'colocate init' upgrades
    c.check_schema()
    history = c.schemas.history("old")
    assert [(h.version, h.columns, h.change) for h in history] == [(1, tuple(COLUMNS), ())]
    t = c.schemas.alter("old", add=["extra string"])
    assert t.schema_version == 2 and t.retention_days is None
    assert c.partitions.list("old")[0].dropped_at is None
    c.dispose()
