"""A replica that goes bad is replaced in the Iceberg table's next snapshot: verify finds a
corrupted file of the replica the Iceberg table names, the table names another good replica of
that bucket before the repair runs, and reads the same rows throughout (pyiceberg against the
rows of each bucket's good replica)."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

from iceberg_lake import iceberg_table, make_lake, named_files, normal, theirs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "balance"))
from balance_lake import rows  # noqa: E402

from airflow_colocate.jobs.tables import TableChange, alter_table  # noqa: E402
from airflow_colocate.storage import fs  # noqa: E402


def test_a_bad_replica_is_replaced_in_the_next_snapshot(tmp_path):
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    for day in ("2026-11-01", "2026-11-02"):
        lake.write("orders", day, range(300))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    named = named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id]
    victim = sorted(f for f in named if "/2026-11-01/" in f)[0]
    with open(fs.local_path(victim), "r+b") as f:  # bytes flipped in place, same size
        f.seek(100)
        data = f.read(8)
        f.seek(100)
        f.write(bytes(b ^ 0xFF for b in data))
    expected = normal({"id": k, "v": f"orders-{d}-{k}", "dt": date.fromisoformat(d)}
                      for d in ("2026-11-01", "2026-11-02") for k in range(300))

    summary = lake.run(verify=True)
    assert summary["verified_bad"] == [victim.rpartition("/")[0]]
    snaps = iceberg_table(lake).metadata.snapshots
    after_mark = named_files(lake)[snaps[1].snapshot_id]  # the snapshot right after the bad mark
    assert victim not in after_mark and len(after_mark) == len(named)
    assert theirs(lake, snapshot_id=snaps[1].snapshot_id) == expected
    # after the repair: every replica whole again, the same rows as each bucket's first good replica
    assert sum(len(r) for r in rows(cat, "orders").values()) == 600
    assert theirs(lake) == expected and cat.iceberg.get("orders").lag_reason is None
    cat.dispose()


def test_a_backend_the_probe_finds_down_leaves_the_next_snapshot(tmp_path):
    """A lost disk found by the probe (no operator, no balance yet): reads prefer the other
    replicas at once, and so does the Iceberg table, so another engine does not fail on it."""
    from airflow_colocate.jobs.health import probe_backends

    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    lake.write("orders", "2026-11-01", range(300))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    named = named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id]
    lost = next(b for b in cat.backends.list() if any(f.startswith(b.root_uri.rstrip("/") + "/") for f in named))
    root = Path(fs.local_path(lost.root_uri))
    root.rename(root.with_name(root.name + "-gone"))

    results = probe_backends(cat)
    assert [(r.reachable, r.backend.state) for r in results if r.backend.id == lost.id] == [(False, "down")]
    now = named_files(lake)[iceberg_table(lake).current_snapshot().snapshot_id]
    assert len(now) == len(named) and not [f for f in now if f.startswith(lost.root_uri.rstrip("/") + "/")]
    assert theirs(lake) == normal({"id": k, "v": f"orders-2026-11-01-{k}", "dt": date(2026, 11, 1)} for k in range(300))
    cat.dispose()
