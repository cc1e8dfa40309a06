"""Issue 31: a query's catalog reads are ONE read transaction (catalog.reads.query), and it
reads exactly what the separate calls it replaces read: each table's replicas, their groups with
bucket maps, the backends, the flags. Nothing is cached across calls: a commit, a backend marked
down and a flag set show in the very next one (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from colocate_testing import add_local_backends
from test_incremental import COLUMNS, Clock, write

from airflow_colocate.catalog import Catalog, query_reads
from airflow_colocate.core.errors import NotFound
from airflow_colocate.jobs.read import plan_query_reads, read_plans

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
TABLES = {"a": DAYS[:2], "default.b": None, "loose": [DAYS[0]]}


@pytest.fixture
def cat(catalog_url, tmp_path):
    c = Catalog(catalog_url, actor="pytest", clock=Clock())
    c.init()
    add_local_backends(c, tmp_path / "backends", n=3)
    for name in ("a", "b"):
        c.tables.create(name, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"], colocate_with="g")
    c.tables.create("loose", COLUMNS, ["id"], bucket_num=2, replication_num=1, partition_cols=["dt"])
    for day in DAYS:
        for name in ("a", "b", "loose"):
            write(c, name, day)
    yield c
    c.dispose()


def _counting(cat: Catalog) -> list[int]:
    """Count the catalog's transactions from here on."""
    calls, tx = [], cat.tx
    cat.tx = lambda fn, *a, **k: (calls.append(1), tx(fn, *a, **k))[1]
    return calls


def _separately(cat: Catalog) -> tuple:
    reads = {name: cat.reads.replicas(name, parts) for name, parts in TABLES.items()}
    groups = {v.group_id: cat.groups.get(v.group_id) for v, _ in reads.values() if v.group_id}
    return reads, groups, cat.backends.list(), cat.flags()


def test_one_transaction_reads_what_the_separate_calls_read(cat):
    want = _separately(cat)
    calls, statements = _counting(cat), []
    event.listen(cat.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    got = cat.reads.query(TABLES)
    assert len(calls) == 1
    # set statements, not one per table or group: tables, partitions, replicas, 3 for the groups,
    # backends, flags (plus SQLite's BEGIN when the session starts one)
    assert len([q for q in statements if q.lstrip().upper().startswith("SELECT")]) == 8
    assert (got.reads, got.groups, got.backends, got.flags) == want
    assert list(got.reads) == list(TABLES) and len(got.groups) == 1 and got.reads["loose"][0].group_id is None
    assert [p.value for p in got.reads["default.b"][1]] == DAYS  # None: every committed partition
    assert all(len(p.buckets) == 4 and all(len(b) == 2 for b in p.buckets) for p in got.reads["a"][1])
    assert next(iter(got.groups.values())).bucket_map  # the map the planner chooses backends from

    del calls[:]
    decided, backends = plan_query_reads(cat, TABLES)
    assert len(calls) == 1 and backends == want[2]
    assert decided == read_plans(cat, TABLES)
    assert [t.name for t in decided.tables] == ["a", "b", "loose"]
    assert not decided.reasons["a"] and not decided.reasons["b"] and decided.reasons["loose"]


def test_the_next_call_sees_a_commit_a_backend_down_and_a_flag(cat):
    before = cat.reads.query(TABLES)
    write(cat, "a", DAYS[1], salt="again")
    loose = {r.backend_id for p in before.reads["loose"][1] for b in p.buckets for r in b}
    be = next(b for b in before.backends if b.id not in loose)  # loose (one replica) stays readable
    cat.backends.set_state(be.id, "down", reason="pulled")
    cat.set_flag("disable_colocate_join", True)
    after = cat.reads.query(TABLES)
    assert after.reads["a"][1][1].version == before.reads["a"][1][1].version + 1
    assert next(b for b in after.backends if b.id == be.id).state == "down"
    assert after.flags["disable_colocate_join"] and not before.flags["disable_colocate_join"]
    assert after == cat.reads.query(TABLES) and after[1:] == _separately(cat)[1:]
    decided, _ = plan_query_reads(cat, TABLES)
    assert all(decided.reasons.values())  # the flag: nothing read colocated


def test_a_missing_partition_or_table_is_refused_by_name(cat):
    with pytest.raises(NotFound, match=r"partition '2026-12-01' of default.a has no committed data; "
                                       r"committed partitions: 2026-11-01, 2026-11-02, 2026-11-03"):
        cat.reads.query({"b": None, "a": ["2026-12-01"]})
    with pytest.raises(NotFound, match=r"unknown table default.nope: 'colocate table list' shows the tables"):
        cat.reads.query({"a": None, "nope": None})


def test_the_statements_split_at_the_bound_value_limit_and_read_the_same(cat, monkeypatch):
    want = _separately(cat)
    monkeypatch.setattr(query_reads, "_PARAMS", 2)  # every table's partitions and replicas in chunks
    got = cat.reads.query(TABLES)
    assert (got.reads, got.groups, got.backends, got.flags) == want
    both = cat.reads.query({"a": [DAYS[2]], "default.a": DAYS[:2]})  # one table, two names
    assert both.reads["a"] == cat.reads.replicas("a", [DAYS[2]])
    assert both.reads["default.a"] == cat.reads.replicas("a", DAYS[:2])
