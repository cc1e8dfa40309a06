"""The catalog's PostgreSQL server going away: stopped in the middle of a write's commit, of a
balance step and of a schema change, restarted under a running balance, and a connection cut by the
server (``pg_terminate_backend``). Each operation that met the fault fails with one line naming the
catalog database; nothing committed is lost, the failed operation changed nothing visible, and the
next operation after the server is back succeeds on the same ``Catalog`` (its pool drops the dead
connections: ``pool_pre_ping``, and a transaction cut before COMMIT runs again on a new one).

The server is a private one (``tests/pgserver.py``), so stopping it never touches the suite's."""

from __future__ import annotations

import pytest
from balance_lake import Clock, Lake, assert_whole, rows
from injection import pg_down, pg_start, pg_stop, pg_terminate_others
from sqlalchemy import event, text
from sqlalchemy.engine import make_url

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import CatalogUnavailable
from airflow_colocate.jobs.write import prepare_write
from pgserver import fresh_pg_database

pytestmark = pytest.mark.postgres

DAY = "2026-11-01"


@pytest.fixture(scope="module")
def own_pg(tmp_path_factory):
    from pgserver import find_pg_bin, start_postgres

    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries not found: 'apt-get install postgresql'")
    server = start_postgres(tmp_path_factory.mktemp("own-pg"))
    pg_stop(server, mode="fast")
    pg_start(server)  # durable: an immediate stop keeps every commit it confirmed
    yield server
    server.stop()


@pytest.fixture
def pg_lake(own_pg, tmp_path):
    url = fresh_pg_database(own_pg.url)
    clock = Clock()
    catalog = Catalog(url, actor="pytest", clock=clock)
    catalog.init()
    lake = Lake(catalog, clock, tmp_path)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    lake.create("orders")
    lake.write("orders", DAY, range(100))
    lake.server, lake.database = own_pg, make_url(url).database
    yield lake
    if not _up(own_pg):
        pg_start(own_pg)
    catalog.dispose()


def _up(server) -> bool:
    from pgserver import _alive, _postmaster_pid

    pid = _postmaster_pid(server.data_dir)
    return pid is not None and _alive(pid)


def stop_on_commit(catalog: Catalog, server):
    """Stop the server the moment the next transaction sends COMMIT: the change is in flight."""
    fired = []

    def on_commit(_conn):
        if not fired:
            fired.append(True)
            pg_stop(server)

    event.listen(catalog.engine, "commit", on_commit)
    return lambda: event.remove(catalog.engine, "commit", on_commit)


def one_line_about_the_catalog(exc: BaseException) -> str:
    line = str(exc)
    assert "\n" not in line and line.startswith("catalog database postgresql") and " is unreachable (" in line, line
    assert "then run the operation again" in line
    return line


def test_server_stopped_during_a_writes_commit(pg_lake):
    lake, catalog = pg_lake, pg_lake.catalog
    before = rows(catalog, "orders")
    planned = prepare_write(catalog, "orders", DAY, Source(format="parquet", path=str(lake.root)), work_dir=lake.work)
    undo = stop_on_commit(catalog, lake.server)
    try:
        with pytest.raises(CatalogUnavailable) as failed:
            lake.write("orders", DAY, range(1000, 1050), ticket_and_plan=planned)
    finally:
        undo()
    assert "the commit was not confirmed" in one_line_about_the_catalog(failed.value)
    pg_start(lake.server)
    assert rows(catalog, "orders") == before  # immediate stop: the in-flight COMMIT never happened
    assert catalog.partitions.list("orders")[0].visible_version == 1
    lake.write("orders", DAY, range(2000, 2010))  # the same Catalog, the next write commits
    assert [r[0] for r in rows(catalog, "orders")[DAY]] == list(range(2000, 2010))


def test_server_stopped_during_a_schema_change(pg_lake):
    catalog = pg_lake.catalog
    undo = stop_on_commit(catalog, pg_lake.server)
    try:
        with pytest.raises(CatalogUnavailable) as failed:
            catalog.schemas.alter("orders", add=[("note", "string")])
    finally:
        undo()
    one_line_about_the_catalog(failed.value)
    pg_start(pg_lake.server)
    assert "note" not in [c for c, _ in catalog.tables.get("orders").columns]
    catalog.schemas.alter("orders", add=[("note", "string")])
    assert "note" in [c for c, _ in catalog.tables.get("orders").columns]


def test_server_down_at_a_balance_step_then_the_next_run_repairs(pg_lake):
    lake, catalog = pg_lake, pg_lake.catalog
    lake.write("orders", "2026-11-02", range(200))
    before = rows(catalog, "orders")
    lake.add_backend("be4")  # balance moves buckets to it

    def stop_after_cloning(step, job_id):
        if step == "cloned" and _up(lake.server):
            pg_stop(lake.server)

    with pytest.raises(CatalogUnavailable) as failed:
        lake.run(on_step=stop_after_cloning)
    one_line_about_the_catalog(failed.value)
    pg_start(lake.server)
    assert rows(catalog, "orders") == before
    lake.run()  # resumes or replans the interrupted job
    assert_whole(catalog)
    assert rows(catalog, "orders") == before
    assert lake.names["be4"] in {b for ids in catalog.groups.get("g").bucket_map for b in ids}


def test_server_restarted_under_a_running_balance_is_not_noticed(pg_lake):
    lake, catalog = pg_lake, pg_lake.catalog
    before = rows(catalog, "orders")
    lake.add_backend("be4")

    def restart(step, job_id):
        if step == "unstable":
            pg_stop(lake.server, mode="fast")
            pg_start(lake.server)

    lake.run(on_step=restart)  # every pooled connection died: the next transactions reconnect
    assert_whole(catalog)
    assert rows(catalog, "orders") == before


def test_connection_cut_by_the_server(pg_lake):
    lake, catalog = pg_lake, pg_lake.catalog
    before = rows(catalog, "orders")
    assert pg_terminate_others(lake.server, lake.database) >= 1  # the pool's idle connection
    assert rows(catalog, "orders") == before  # pre-ping: a new connection, no error

    # cut while a transaction is open, before COMMIT: it runs again on a new connection
    cut = []

    def cut_once(conn, cursor, statement, parameters, context, executemany):
        if not cut and statement.lstrip().upper().startswith("INSERT INTO EVENTS"):
            cut.append(pg_terminate_others(lake.server, lake.database))

    event.listen(catalog.engine, "before_cursor_execute", cut_once)
    try:
        catalog.set_flag("disable_colocate_balance", True)
    finally:
        event.remove(catalog.engine, "before_cursor_execute", cut_once)
    assert cut == [1] and catalog.flags()["disable_colocate_balance"] is True
    with catalog.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM events WHERE kind = 'flag.set'")).scalar() == 1
    lake.write("orders", DAY, range(5))
    assert len(rows(catalog, "orders")[DAY]) == 5


def test_a_command_against_a_stopped_server_says_so(pg_lake, monkeypatch, capsys):
    from airflow_colocate.cli import main

    monkeypatch.setenv("COLOCATE_CATALOG_URL", str(pg_lake.catalog.engine.url.render_as_string(hide_password=False)))
    with pg_down(pg_lake.server):
        assert main(["backend", "list"]) != 0
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "catalog database postgresql" in err and "is unreachable (" in err, err
    assert main(["backend", "list"]) == 0
