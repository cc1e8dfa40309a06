"""Migration 0003 on a catalog that already holds data: the bucket summaries, the versions' write
jobs and the jobs gc still owes a staging directory are filled from the rows already there, so an
upgraded catalog answers exactly like one that always had them (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from alembic import command
from alembic.script import ScriptDirectory
from colocate_testing import add_local_backends
from sqlalchemy import create_engine, select
from test_incremental import COLUMNS, Clock, write

from airflow_colocate.catalog import Catalog, summary
from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.migrate import _config, head_revision
from airflow_colocate.core.contract import VerifyResult


def state(cat: Catalog):
    def run(s):
        return (summary.stored(s),
                sorted(s.execute(select(m.PartitionVersion.partition_id, m.PartitionVersion.version,
                                        m.PartitionVersion.job_id)).all()),
                sorted(s.execute(select(m.Job.id, m.Job.gc_pending)).all()))
    return cat.tx(run)


def test_upgrade_fills_summaries_and_links_from_existing_rows(catalog_url, tmp_path):
    clock = Clock()
    cat = Catalog(catalog_url, actor="pytest", clock=clock)
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=3)
    cat.tables.create("a", COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"], colocate_with="g")
    cat.tables.create("loose", COLUMNS, ["id"], bucket_num=2, replication_num=1, partition_cols=["dt"])
    for day in ("2026-11-01", "2026-11-02"):
        write(cat, "a", day)
        write(cat, "loose", day)
    write(cat, "a", "2026-11-01", salt="overwrite")  # a superseded version, still on disk
    bad = next(r for r in cat.health.replicas_to_verify() if "/a_" in r.path)
    cat.health.record_verify([VerifyResult(bad.replica_id, ok=False, error="mismatch")])
    clock.t += timedelta(hours=2)
    cat.writes.forget_garbage([g for g in cat.writes.garbage() if g.reason == "write staging" and g.job_id % 2])  # some still owed
    before = state(cat)
    check = cat.health.check_group("g")
    assert before[0][0] and any(not pending for _, pending in before[2]) and any(p for _, p in before[2])

    cfg = _config()
    plain = create_engine(catalog_url)  # SQLite: without the catalog's foreign-key pragma, so batch mode may copy tables
    with plain.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
        tables = set(conn.dialect.get_table_names(conn))
    plain.dispose()
    assert "bucket_replicas" not in tables and "group_checks" not in tables
    cat.init()  # 'colocate init' upgrades the existing catalog
    cat.check_schema()
    assert state(cat) == before
    assert cat.tx(summary.drift) == []
    again = cat.health.check_group("g")
    assert not again.reused and (again.reasons, again.problems) == (check.reasons, check.problems)
    assert {g.uri for g in cat.writes.garbage()} == {g.uri for g in Catalog(catalog_url, clock=clock).writes.garbage()}
    cat.dispose()


def test_the_head_read_from_the_files_is_alembics():
    assert head_revision() == ScriptDirectory.from_config(_config()).get_current_head()
