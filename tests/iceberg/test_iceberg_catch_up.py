"""A catch-up after a lag publishes one Iceberg snapshot per commit of ours the lag missed, in our
order, each holding exactly the rows our catalog held right after that commit, at the schema of
then; gc run during the lag deletes none of the files the catch-up names; a process killed half-way
through a catch-up is finished by the next with no snapshot twice; and when a missed version's
files are gone anyway, the catch-up publishes the present as one snapshot and says so, naming no
missing file. pyiceberg reads, no Spark."""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from types import SimpleNamespace

import pyarrow as pa
import pytest
from iceberg_lake import iceberg_table, make_lake, named_files, normal, rows, theirs

from airflow_colocate.catalog.iceberg import Iceberg
from airflow_colocate.cli import main
from airflow_colocate.jobs import iceberg as publication
from airflow_colocate.jobs.tables import TableChange, alter_table
from airflow_colocate.storage import fs

D1, D2 = "2026-11-01", "2026-11-02"


class Killed(BaseException):
    """The process ends here, as a SIGKILL would (no handler of ours runs)."""


def unreachable(monkeypatch, tmp_path) -> None:
    """The Iceberg catalog cannot be opened from now on (a SQLite file in a folder that does not
    exist). Its retries' pauses are skipped: each would be the same failure, 1.2 s later."""
    monkeypatch.setenv(publication.CATALOG_ENV, json.dumps({"type": "sql", "uri": f"sqlite:///{tmp_path}/no/dir/x.db"}))
    monkeypatch.setattr(publication, "time", SimpleNamespace(sleep=lambda seconds: None))


def version_dirs(cat, value: str, version: int) -> set[str]:
    got = cat.iceberg.version_replicas(cat.tables.get("orders").id, [(value, version)])[(value, version)]
    return {r.path for b in got.buckets for r in b}


def test_a_catch_up_is_one_snapshot_per_missed_commit_in_our_order(catalog_url, tmp_path, monkeypatch, capsys):
    lake = make_lake(catalog_url, tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    lake.write("orders", D1, range(50))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    want = [rows({D1: range(50)})]  # each snapshot's rows, in our order

    unreachable(monkeypatch, tmp_path)  # five commits of ours while the Iceberg catalog is away
    lake.write("orders", D2, range(100, 130))  # a new partition
    want.append(rows({D1: range(50), D2: range(100, 130)}))
    lake.write("orders", D1, range(200, 220))  # an overwrite: v2, visible only while Iceberg lags
    want.append(rows({D1: range(200, 220), D2: range(100, 130)}))
    alter_table(cat, "orders", TableChange(add=[("qty", "int")], retention_days=400))  # a schema change (and another)
    want.append(rows({D1: range(200, 220), D2: range(100, 130)}, qty=lambda d, k: None))
    lake.extra = {"qty": (pa.int32(), lambda k: k % 5)}
    lake.write("orders", D1, range(300, 310))  # an overwrite with the new column: v3
    want.append(rows({D1: range(300, 310), D2: range(100, 130)}, qty=lambda d, k: k % 5 if d == D1 else None))
    assert main(["--catalog", cat.url, "partition", "drop", "orders", D2]) == 0  # a partition drop
    want.append(rows({D1: range(300, 310)}, qty=lambda d, k: k % 5))
    assert cat.iceberg.get("orders").lag_since is not None

    # gc during the lag: v2 of D1 is garbage to our catalog, but the catch-up names it
    lake.clock.advance(hours=2)
    v2 = version_dirs(cat, D1, 2)
    trees = {d.rpartition("/")[0] for d in v2}  # v2's folder on each backend: what gc deletes
    assert trees <= {i.uri for i in cat.writes.garbage(grace=timedelta(hours=1))}
    assert cat.iceberg.held(trees) == set()  # no snapshot named v2, so no pin keeps it: the lag's rule does
    assert (next(p.id for p in cat.partitions.list("orders") if p.value == D1), 2) in cat.iceberg.awaited()
    capsys.readouterr()
    assert main(["--catalog", cat.url, "gc"]) == 0
    assert f"{len(trees)} item(s) kept: a lagging Iceberg table's catch-up names them" in capsys.readouterr().out
    assert all(os.path.isdir(fs.local_path(d)) for d in v2)

    # killed after the first replayed snapshot reached Iceberg, before it was recorded
    monkeypatch.delenv(publication.CATALOG_ENV)

    def killed(*args, **kwargs):
        raise Killed("SIGKILL")

    monkeypatch.setattr(Iceberg, "replayed", killed)
    with pytest.raises(Killed):
        main(["--catalog", cat.url, "iceberg", "publish", "orders"])
    monkeypatch.undo()
    assert len(iceberg_table(lake).metadata.snapshots) == 2
    capsys.readouterr()
    assert main(["--catalog", cat.url, "iceberg", "publish"]) == 0  # the next one finishes it
    assert "3 missed commit(s) published before it, one snapshot each" in capsys.readouterr().out

    tbl = iceberg_table(lake)
    snaps = tbl.metadata.snapshots
    assert len(snaps) == len(want) == 6
    assert [s.parent_snapshot_id for s in snaps[1:]] == [s.snapshot_id for s in snaps[:-1]]
    schemas = {s.schema_id: s for s in tbl.metadata.schemas}
    assert [len(schemas[s.schema_id].fields) for s in snaps] == [3, 3, 3, 4, 4, 4]
    for i, (snap, expected) in enumerate(zip(snaps, want)):
        assert normal(tbl.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()) == expected, f"snapshot {i}"
    assert theirs(lake) == want[-1]
    assert publication.lag(cat) == [] and cat.iceberg.get("orders").lag_since is None
    named = named_files(lake)
    assert all(os.path.exists(fs.local_path(f)) for files in named.values() for f in files)
    chosen = {f.rpartition("/")[0] for f in named[snaps[2].snapshot_id]} & v2
    assert len(chosen) == 3  # v2 of D1, as gc kept it: one replica of each bucket
    assert {f.rpartition("/")[0] for f in named[snaps[3].snapshot_id]} & v2 == chosen

    assert main(["--catalog", cat.url, "iceberg", "publish"]) == 0  # a repeated publish: no snapshot
    assert len(iceberg_table(lake).metadata.snapshots) == 6
    # caught up: nothing awaits any more; the snapshots' pins keep what they name of v2 until they expire
    assert cat.iceberg.awaited() == set() and cat.iceberg.held(v2) == chosen
    cat.dispose()


def test_a_catch_up_whose_missed_files_are_gone_is_one_snapshot(tmp_path, monkeypatch, capsys):
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=1)
    lake.write("orders", D1, range(40))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    unreachable(monkeypatch, tmp_path)
    lake.write("orders", D1, range(100, 140))  # v2: missed
    lake.write("orders", D1, range(200, 240))  # v3: missed
    monkeypatch.delenv(publication.CATALOG_ENV)
    for d in version_dirs(cat, D1, 2):  # v2's files deleted behind the catalog's back
        shutil.rmtree(fs.local_path(d))

    capsys.readouterr()
    assert main(["--catalog", cat.url, "iceberg", "publish"]) == 0
    out = capsys.readouterr().out
    assert "2 missed commits published as one snapshot of the present state: the files of default.orders/" in out
    assert "v2 are gone" in out and "is missing" in out
    tbl = iceberg_table(lake)
    assert len(tbl.metadata.snapshots) == 2
    assert theirs(lake) == rows({D1: range(200, 240)})
    assert all(os.path.exists(fs.local_path(f)) for files in named_files(lake).values() for f in files)
    assert publication.lag(cat) == []
    cat.dispose()


def test_a_missed_transaction_of_several_partitions_is_one_snapshot(tmp_path, monkeypatch):
    """A retention's drops of two partitions are one transaction of ours, then a recover."""
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=2, replicas=1)
    for day in (D1, D2):
        lake.write("orders", day, range(10))
    alter_table(cat, "orders", TableChange(retention_days=2, iceberg=True,
                                           iceberg_warehouse=(tmp_path / "wh").as_uri()))
    unreachable(monkeypatch, tmp_path)
    lake.write("orders", "2026-11-05", range(20, 30))
    assert main(["--catalog", cat.url, "partition", "expire", "--today", "2026-11-05"]) == 0  # D1 and D2 at once
    assert main(["--catalog", cat.url, "partition", "recover", "orders", D1]) == 0
    lake.write("orders", "2026-11-06", range(40, 50))
    monkeypatch.undo()
    assert main(["--catalog", cat.url, "iceberg", "publish"]) == 0

    snaps = iceberg_table(lake).metadata.snapshots
    got = [{str(r["dt"]) for r in iceberg_table(lake).scan(snapshot_id=s.snapshot_id).to_arrow().to_pylist()}
           for s in snaps]
    # never a state with one of the two expired partitions and not the other: no reader of ours saw one
    assert got == [{D1, D2}, {D1, D2, "2026-11-05"}, {"2026-11-05"}, {D1, "2026-11-05"}, {D1, "2026-11-05", "2026-11-06"}]
    cat.dispose()
