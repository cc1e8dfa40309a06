"""ENOSPC on the catalog's own disk: the SQLite file lives on a small tmpfs that fills up between a
write's planning and its commit. The commit fails with one line naming the catalog and the full
disk; the partition keeps its committed version with exactly its rows; once space is freed, the
same write commits."""

from __future__ import annotations

import sqlite3

import pytest
from balance_lake import Clock, Lake, rows
from injection import fill, small_tmpfs

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import CatalogUnavailable
from airflow_colocate.jobs.write import prepare_write

DAY = "2026-11-01"


def test_commit_on_a_full_catalog_disk_says_so_and_loses_nothing(tmp_path):
    with small_tmpfs(tmp_path / "catalog", size="4m") as disk:
        db = disk / "catalog.db"
        clock = Clock()
        catalog = Catalog(f"sqlite:///{db}", actor="pytest", clock=clock)
        catalog.init()
        lake = Lake(catalog, clock, tmp_path)
        for name in ("be1", "be2", "be3"):
            lake.add_backend(name)
        lake.create("orders")
        lake.write("orders", DAY, range(100))
        before = rows(catalog, "orders")
        assert len(before[DAY]) == 100

        planned = prepare_write(catalog, "orders", DAY, Source(format="parquet", path=str(tmp_path)), work_dir=tmp_path / "runs")
        # an empty write-ahead log (as after a checkpoint), then a disk with no block left
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = fill(disk)
        with pytest.raises(CatalogUnavailable) as failed:
            lake.write("orders", DAY, range(1000, 1050), ticket_and_plan=planned)
        line = str(failed.value)
        assert "\n" not in line and line.startswith(f"catalog database sqlite:///{db} has no space left on its disk")
        assert "free space on the catalog's disk" in line

        filler.unlink()  # the operator frees space: what was committed is intact, the failed write invisible
        assert rows(catalog, "orders") == before
        assert catalog.partitions.list("orders")[0].visible_version == 1
        lake.write("orders", DAY, range(2000, 2010))  # the next write commits
        assert [r[0] for r in rows(catalog, "orders")[DAY]] == list(range(2000, 2010))
        catalog.dispose()
