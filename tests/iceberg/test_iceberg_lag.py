"""The Iceberg commit never blocks or fails ours: an Iceberg catalog that cannot be reached, or a
process killed between our commit and Iceberg's, leaves our commit done and readable and the
Iceberg table one commit behind; doctor names the lag and why, and 'colocate iceberg publish'
finishes it. No snapshot ever holds part of one of our writes."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from iceberg_lake import iceberg_table, make_lake, ours, theirs

import airflow_colocate.iceberg.publisher as publisher
from airflow_colocate.cli import main
from airflow_colocate.jobs import iceberg as publication
from airflow_colocate.jobs.doctor import iceberg_facts
from airflow_colocate.jobs.tables import TableChange, alter_table

pytestmark = pytest.mark.spark


class Killed(BaseException):
    """The process ends here, as a SIGKILL would (no handler of ours runs)."""


def test_a_lagging_publication_is_shown_and_caught_up(catalog_url, tmp_path, spark, monkeypatch, capsys):
    lake = make_lake(catalog_url, tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    written = defaultdict(list)  # partition -> the key set of each version we committed

    def write(day, keys):
        written[day].append(set(keys))
        lake.write("orders", day, keys)

    write("2026-11-01", range(0, 90))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    assert theirs(lake) == ours(spark, lake)
    assert iceberg_facts(cat, []) == [{"table": "default.orders", "warehouse": (tmp_path / "wh").as_uri(),
                                       "snapshot_id": cat.iceberg.get("orders").snapshot_id, "lags": False}]

    # killed between our commit and Iceberg's: ours is done, Iceberg's never started
    def killed(*args, **kwargs):
        raise Killed("SIGKILL")

    monkeypatch.setattr(publisher, "publish", killed)
    with pytest.raises(Killed):
        write("2026-11-02", range(100, 160))
    monkeypatch.undo()
    assert len(ours(spark, lake)) == 150  # our commit stands
    assert len(theirs(lake)) == 90
    problems: list[str] = []
    assert iceberg_facts(cat, problems)[0]["lags"]
    assert problems == ["default.orders: Iceberg metadata lags: a commit of ours was not published yet (a process "
                        "stopped between the two commits); 'colocate iceberg publish default.orders' catches up"]

    # an Iceberg catalog that cannot be reached: our write commits, the lag is recorded with why
    monkeypatch.setenv(publication.CATALOG_ENV, json.dumps({"type": "sql", "uri": f"sqlite:///{tmp_path}/no/such/dir/x.db"}))
    write("2026-11-01", range(200, 230))  # an overwrite of a partition
    assert len(ours(spark, lake)) == 90
    pub = cat.iceberg.get("orders")
    assert pub.lag_since is not None and "unable to open database file" in pub.lag_reason
    problems = []
    iceberg_facts(cat, problems)
    assert len(problems) == 1 and "unable to open database file" in problems[0]
    assert main(["--catalog", cat.url, "iceberg", "publish", "orders"]) == 1  # still unreachable: exit 1
    assert "lags" in capsys.readouterr().err

    monkeypatch.delenv(publication.CATALOG_ENV)
    assert main(["--catalog", cat.url, "iceberg", "publish"]) == 0
    assert "Iceberg snapshot" in capsys.readouterr().out
    assert theirs(lake) == ours(spark, lake)
    assert cat.iceberg.get("orders").lag_reason is None and iceberg_facts(cat, problems := []) and not problems
    assert main(["--catalog", cat.url, "iceberg", "publish"]) == 0  # up to date: no new snapshot
    assert "up to date" in capsys.readouterr().out

    # every snapshot, old ones included, holds whole versions of ours, never part of one
    tbl = iceberg_table(lake)
    for snap in tbl.metadata.snapshots:
        got = defaultdict(set)
        for row in tbl.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist():
            got[str(row["dt"])].add(row["id"])
        for day, keys in got.items():
            assert keys in written[day], f"snapshot {snap.snapshot_id} holds part of a write of {day}"
    lake.catalog.dispose()


def test_turning_publication_on_is_checked(tmp_path, monkeypatch, capsys):
    lake = make_lake(f"sqlite:///{tmp_path / 'c.db'}", tmp_path)
    lake.create("orders")
    monkeypatch.delenv(publication.WAREHOUSE_ENV, raising=False)
    url = lake.catalog.url
    assert main(["--catalog", url, "table", "alter", "orders", "--iceberg", "on"]) == 2
    assert main(["--catalog", url, "table", "alter", "orders", "--iceberg", "off"]) == 2
    assert main(["--catalog", url, "table", "alter", "orders", "--iceberg", "on", "--iceberg-warehouse", "lake"]) == 2
    assert main(["--catalog", url, "table", "alter", "orders", "--iceberg-warehouse", "file:///x"]) == 2
    assert lake.catalog.iceberg.list(enabled_only=False) == []  # every refusal changed nothing
    capsys.readouterr()
    assert main(["--catalog", url, "table", "alter", "orders", "--iceberg", "on", "--iceberg-warehouse",
                 (tmp_path / "wh").as_uri()]) == 0
    assert f"Iceberg table at snapshot (none: no rows yet) under {(tmp_path / 'wh').as_uri()}/default/orders_1" in capsys.readouterr().out
    assert lake.catalog.iceberg.get("orders").digest is not None  # an empty table: an empty Iceberg table
    assert iceberg_table(lake).scan().to_arrow().num_rows == 0
    lake.catalog.dispose()
