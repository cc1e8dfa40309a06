"""Never a dangling file when a published table goes: dropping it drops its Iceberg table (a
recover publishes it again), and purging it waits until its Iceberg table is gone before its pins
go and gc may delete its files. A process killed before or after the Iceberg drop leaves the pins,
so gc keeps every file; the next purge finishes. pyiceberg reads, no Spark."""

from __future__ import annotations

import os
from datetime import date, timedelta

import pytest
from iceberg_lake import iceberg_table, make_lake, named_files, normal, theirs
from pyiceberg.exceptions import NoSuchTableError

import airflow_colocate.iceberg.publisher as publisher
from airflow_colocate.catalog.iceberg import Iceberg
from airflow_colocate.cli import main
from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.jobs.tables import TableChange, alter_table
from airflow_colocate.storage import fs

DAYS = ("2026-11-01", "2026-11-02")


class Killed(BaseException):
    """The process ends here, as a SIGKILL would (no handler of ours runs)."""


def killed(*args, **kwargs):
    raise Killed("SIGKILL")


def test_a_purged_table_takes_its_iceberg_table_first(tmp_path, monkeypatch):
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat, url = lake.catalog, lake.catalog.url
    lake.create("orders", buckets=3, replicas=2)
    for day in DAYS:
        lake.write("orders", day, range(120))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    expected = normal({"id": k, "v": f"orders-{d}-{k}", "dt": date.fromisoformat(d)} for d in DAYS for k in range(120))
    assert theirs(lake) == expected
    table_id = cat.tables.get("orders").id
    location = cat.iceberg.get("orders").location
    assert os.path.isdir(fs.local_path(location))

    def gone() -> bool:
        try:
            iceberg_table(lake)
        except NoSuchTableError:
            return True
        return False

    # a drop takes the Iceberg table (no engine reads a dropped table), a recover publishes it again
    assert main(["--catalog", url, "table", "drop", "orders"]) == 0
    assert gone() and not os.path.exists(fs.local_path(location))
    assert main(["--catalog", url, "table", "recover", "orders"]) == 0
    assert theirs(lake) == expected and len(iceberg_table(lake).metadata.snapshots) == 1
    files = set().union(*named_files(lake).values())
    dirs = {f.rpartition("/")[0] for f in files}
    assert cat.iceberg.held(dirs) == dirs

    # killed after our drop, before the Iceberg drop: the Iceberg table and every pin stay
    monkeypatch.setattr(publisher, "drop_table", killed)
    with pytest.raises(Killed):
        main(["--catalog", url, "table", "drop", "orders"])
    monkeypatch.undo()
    assert cat.tables.list(include_dropped=True)[0].state == "dropped"
    assert not gone() and cat.iceberg.held(dirs) == dirs
    lake.clock.advance(hours=25)
    assert cat.tables.purge_dropped(retention=timedelta(0)) == []  # the catalog alone never purges it

    # killed after the Iceberg drop, before the pins went: the table is not purged, gc keeps its files
    monkeypatch.setattr(Iceberg, "withdrawn", killed)
    with pytest.raises(Killed):
        main(["--catalog", url, "table", "purge", "--retention-hours", "0"])
    monkeypatch.undo()
    assert gone() and cat.iceberg.held(dirs) == dirs and cat.iceberg.find(table_id) is not None
    collect_garbage(cat, grace=timedelta(0), stale_after=timedelta(days=1))
    assert all(os.path.exists(fs.local_path(f)) for f in files)

    # the next purge finishes: pins and publication go with the table, then gc deletes its files
    assert main(["--catalog", url, "table", "purge", "--retention-hours", "0"]) == 0
    assert cat.iceberg.find(table_id) is None and cat.iceberg.held(dirs) == set()
    assert cat.tables.list(include_dropped=True) == []
    collect_garbage(cat, grace=timedelta(0), stale_after=timedelta(days=1))
    assert not any(os.path.exists(fs.local_path(f)) for f in files)
    assert gone() and not os.path.exists(fs.local_path(location))
    cat.dispose()


def test_drop_force_of_a_published_table_drops_its_iceberg_table_then_purges(tmp_path, monkeypatch):
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat, url = lake.catalog, lake.catalog.url
    lake.create("orders", buckets=2, replicas=1)
    lake.write("orders", DAYS[0], range(40))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    table_id = cat.tables.get("orders").id
    with pytest.raises(Exception, match="published as an Iceberg table: its Iceberg table is dropped before"):
        cat.tables.drop("orders", force=True)  # the catalog alone refuses, and changes nothing
    assert cat.tables.get("orders").state == "normal" and cat.iceberg.find(table_id).snapshot_id is not None
    # an Iceberg catalog that cannot be reached: dropped, not purged, one line saying how it finishes
    monkeypatch.setenv("COLOCATE_ICEBERG_CATALOG", f'{{"type": "sql", "uri": "sqlite:///{tmp_path}/no/dir/x.db"}}')
    assert main(["--catalog", url, "table", "drop", "orders", "--force"]) == 2
    assert cat.tables.list(include_dropped=True)[0].state == "dropped"
    monkeypatch.delenv("COLOCATE_ICEBERG_CATALOG")
    assert main(["--catalog", url, "table", "recover", "orders"]) == 0
    assert main(["--catalog", url, "table", "drop", "orders", "--force"]) == 0
    assert cat.tables.list(include_dropped=True) == [] and cat.iceberg.find(table_id) is None
    with pytest.raises(NoSuchTableError):
        iceberg_table(lake)
    cat.dispose()


def test_a_publication_under_way_when_the_table_is_dropped_leaves_no_iceberg_table(tmp_path, monkeypatch):
    """A drop runs while a publication is between loading our catalog and its Iceberg commit (the
    drop drops the Iceberg table, the publication then creates it again): the publication drops it
    once more, and records nothing as published."""
    from airflow_colocate.jobs import iceberg as publication
    from airflow_colocate.jobs.tables import drop_table

    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    lake.write("orders", DAYS[0], range(60))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    real_table_for = publisher.table_for
    dropped = []

    def table_for_after_a_drop(*args, **kwargs):  # the drop lands between our read and the Iceberg commit
        if not dropped:
            dropped.append(drop_table(cat, "orders"))
        return real_table_for(*args, **kwargs)

    monkeypatch.setattr(publisher, "table_for", table_for_after_a_drop)
    pub = cat.iceberg.get("orders")
    out = publication.publish_one(cat, pub, retries=(), whole=True)
    assert dropped and "dropped while it was published" in (out.error or "")
    with pytest.raises(NoSuchTableError):
        iceberg_table(lake)
