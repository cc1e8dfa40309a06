"""One Iceberg snapshot per commit of ours, in our order, a schema change included: a column added
or widened is a snapshot of the same files read with the new schema (not a new schema with no
snapshot). Each snapshot is read at its own schema and holds exactly the rows our catalog held
right after that commit. pyiceberg reads, no Spark."""

from __future__ import annotations


import pyarrow as pa
from iceberg_lake import iceberg_table, make_lake, normal, rows, theirs

from airflow_colocate.cli import main
from airflow_colocate.jobs.tables import TableChange, alter_table


def test_each_commit_is_one_snapshot_in_our_order(tmp_path):
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    lake.write("orders", "2026-11-01", range(50))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    want = [rows({"2026-11-01": range(50)})]  # each snapshot's rows, in our order

    lake.write("orders", "2026-11-02", range(100, 130))  # a commit
    want.append(rows({"2026-11-01": range(50), "2026-11-02": range(100, 130)}))
    alter_table(cat, "orders", TableChange(add=[("qty", "int")]))  # a schema change alone
    want.append(rows({"2026-11-01": range(50), "2026-11-02": range(100, 130)}, qty=lambda d, k: None))
    lake.extra = {"qty": (pa.int32(), lambda k: k % 5)}
    lake.write("orders", "2026-11-01", range(200, 220))  # an overwrite, with the new column
    both = {"2026-11-01": range(200, 220), "2026-11-02": range(100, 130)}
    want.append(rows(both, qty=lambda d, k: k % 5 if d == "2026-11-01" else None))
    alter_table(cat, "orders", TableChange(widen=[("qty", "bigint")]))  # a widening alone
    want.append(want[-1])
    assert main(["--catalog", cat.url, "partition", "drop", "orders", "2026-11-02"]) == 0
    want.append(rows({"2026-11-01": range(200, 220)}, qty=lambda d, k: k % 5))

    tbl = iceberg_table(lake)
    snaps = tbl.metadata.snapshots
    assert len(snaps) == len(want) == 6
    assert [e.snapshot_id for e in tbl.metadata.snapshot_log] == [s.snapshot_id for s in snaps]
    assert [s.parent_snapshot_id for s in snaps[1:]] == [s.snapshot_id for s in snaps[:-1]]
    schemas = {s.schema_id: s for s in tbl.metadata.schemas}
    assert [[f.name for f in schemas[s.schema_id].fields] for s in snaps] == [["id", "v", "dt"]] * 2 + [
        ["id", "v", "dt", "qty"]] * 4
    assert [str(schemas[s.schema_id].find_field("qty").field_type) for s in snaps[2:]] == ["int", "int", "long", "long"]
    for i, (snap, expected) in enumerate(zip(snaps, want)):
        got = tbl.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
        assert normal(got) == expected, f"snapshot {i}"
    assert theirs(lake) == want[-1]
    cat.dispose()
