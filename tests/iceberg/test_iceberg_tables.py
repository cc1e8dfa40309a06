"""Every colocated table readable as an Iceberg table (issue 44): pyiceberg reads exactly our
read's rows after each kind of commit of ours, each commit is one Iceberg snapshot in our order,
field ids follow our schema versions (Spark's own Iceberg reader agrees), a replica the repair
moved away from is no longer named,
gc never deletes a file a retained snapshot names, and an Iceberg commit that failed or was killed
after ours is a lag doctor shows and 'colocate iceberg publish' finishes."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from iceberg_lake import as_json, iceberg_table, make_lake, named_files, ours, spark_reader, theirs

from airflow_colocate.cli import main
from airflow_colocate.jobs import iceberg as publication
from airflow_colocate.jobs.backends import change_state
from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.jobs.tables import TableChange, alter_table

pytestmark = pytest.mark.spark

DAYS = [f"2026-11-0{d}" for d in range(1, 7)]


@pytest.fixture
def lake(tmp_path):
    lk = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    yield lk
    lk.catalog.dispose()


def snapshots(lake) -> list:
    return list(iceberg_table(lake).metadata.snapshots)


def same(spark, lake) -> list[tuple]:
    mine = ours(spark, lake)
    assert theirs(lake) == mine
    return mine


def test_published_table_follows_every_commit_in_our_order(lake, spark, tmp_path, capsys):
    cat = lake.catalog
    reader = spark_reader()  # Spark's own Iceberg reader (4.1 line): its JVM starts while the test goes on
    lake.create("orders", buckets=4, replicas=2)
    for i, day in enumerate(DAYS[:3]):  # history before the table is published
        lake.write("orders", day, range(i * 100, i * 100 + 150))
    warehouse = (tmp_path / "warehouse").as_uri()
    t = alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=warehouse))
    assert t.id
    pub = cat.iceberg.get("orders")
    assert pub.lag_reason is None and pub.snapshot_id is not None
    assert len(snapshots(lake)) == 1  # the history as one snapshot
    assert len(same(spark, lake)) == 450
    # exactly one replica of every bucket that has rows: no row twice, and the replica reads prefer
    files = named_files(lake)[pub.snapshot_id]
    _, parts = cat.reads.replicas("orders")
    assert len({f.rpartition("/")[0] for f in files}) == sum(1 for p in parts for b in p.buckets if b[0].rows)

    for i, day in enumerate(DAYS[3:], 3):  # each write of ours: one snapshot, in order
        lake.write("orders", day, range(i * 100, i * 100 + 150))
    assert len(snapshots(lake)) == 4
    history = [s.snapshot_id for s in snapshots(lake)]
    assert [e.snapshot_id for e in iceberg_table(lake).metadata.snapshot_log] == history
    assert len(same(spark, lake)) == 900
    assert publication.lag(cat) == []  # a write's digest, updated from its partition alone, is the whole one

    # add a column, write with it; widen it; drop another: one schema each, ids never reused
    alter_table(cat, "orders", TableChange(add=[("qty", "int")]))
    lake.extra = {"qty": (pa.int32(), lambda k: k % 7)}
    lake.write("orders", "2026-11-07", range(700, 760))
    alter_table(cat, "orders", TableChange(widen=[("qty", "bigint")]))
    rows = same(spark, lake)
    assert dict(rows[-1])["qty"] is not None and len(rows) == 960
    alter_table(cat, "orders", TableChange(drop=["v"]))
    lake.without = {"v"}
    lake.write("orders", "2026-11-08", range(800, 830))
    schema = iceberg_table(lake).schema()
    assert [(f.field_id, f.name, str(f.field_type)) for f in schema.fields] == [
        (1, "id", "long"), (3, "dt", "date"), (4, "qty", "long")]
    at_drop = same(spark, lake)
    assert len(at_drop) == 990
    reader.read(iceberg_table(lake).metadata_location)  # this state, whatever is committed later

    # a partition dropped and recovered (through the command), then overwritten
    before = len(snapshots(lake))
    url = cat.url
    assert main(["--catalog", url, "partition", "drop", "orders", "2026-11-02"]) == 0
    assert len(same(spark, lake)) == 840
    assert main(["--catalog", url, "partition", "recover", "orders", "2026-11-02"]) == 0
    assert len(same(spark, lake)) == 990
    lake.write("orders", "2026-11-02", range(5000, 5010))  # an overwrite of the partition
    assert len(same(spark, lake)) == 850
    assert len(snapshots(lake)) == before + 3
    capsys.readouterr()

    # a lost backend repaired: the replicas on it are no longer named, the rows are the same
    be2 = lake.names["be2"]
    root2 = lake.backend_root("be2")
    assert any(f.startswith(root2) for f in named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id])
    change_state(cat, "be2", "down", reason="disk died")  # an admin's mark: reads, and the Iceberg table, avoid it at once
    now_named = named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id]
    assert not any(f.startswith(root2 + "/") for f in now_named)
    assert theirs(lake) == ours(spark, lake)
    lake.clock.advance(minutes=31)
    lake.run()
    assert be2 not in {be for ids in cat.groups.get("g").bucket_map for be in ids}
    current = named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id]
    assert not any(f.startswith(root2 + "/") for f in current)
    repaired = same(spark, lake)
    assert len(repaired) == 850
    assert_named_files_exist(lake)
    reader.read(iceberg_table(lake).metadata_location)

    # a balance onto a new backend: the moved buckets' old replicas, which retained snapshots name,
    # are kept by the drop step of the same run (and of the next) until those expire
    lake.add_backend("be4")
    before_balance = replica_paths(cat)
    summary = lake.run()
    assert [j.kind for j in summary["jobs"]] == ["balance"] and summary["jobs"][0].moves > 0
    balanced = named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id]
    assert any(f.startswith(lake.backend_root("be4") + "/") for f in balanced)
    assert same(spark, lake) == repaired
    assert_named_files_exist(lake)
    reader.read(iceberg_table(lake).metadata_location)
    moved_away = {f for f in current if f.rpartition("/")[0] in before_balance - replica_paths(cat)}
    assert moved_away and all(os.path.exists(f.removeprefix("file://")) for f in moved_away)

    # before expiry: the files the old states name are kept till then
    assert reader() == [as_json(at_drop), as_json(repaired), as_json(repaired)]

    # gc: every file a retained snapshot names is still there after it; expiry releases them
    lake.clock.advance(hours=2)
    collect_garbage(cat, grace=publication.DEFAULT_RECYCLE_BIN * 0, stale_after=publication.DEFAULT_RECYCLE_BIN)
    lake.run()
    assert_named_files_exist(lake)
    old = set().union(*named_files(lake).values())
    lake.clock.t = datetime.now(timezone.utc) + timedelta(days=2)  # past the commands' own clock too
    lines = publication.expire(cat, retention=publication.DEFAULT_RECYCLE_BIN)
    assert "expired" in lines[0] and len(snapshots(lake)) == 1
    lake.run()  # the repair's dropped replicas: deletable now that no snapshot names them
    collect_garbage(cat, grace=publication.DEFAULT_RECYCLE_BIN * 0, stale_after=publication.DEFAULT_RECYCLE_BIN)
    assert_named_files_exist(lake)
    assert any(not os.path.exists(f.removeprefix("file://")) for f in old)  # released files did go
    assert not any(os.path.exists(f.removeprefix("file://")) for f in moved_away)  # the balance's too
    assert theirs(lake) == ours(spark, lake)


def replica_paths(cat) -> set[str]:
    _, parts = cat.reads.replicas("orders")
    return {r.path.rstrip("/") for p in parts for b in p.buckets for r in b}


def assert_named_files_exist(lake) -> None:
    for snap, files in named_files(lake).items():
        missing = [f for f in files if not os.path.exists(f.removeprefix("file://"))]
        assert not missing, f"snapshot {snap} names deleted files: {missing[:3]}"
