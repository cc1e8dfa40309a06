"""The control plane on backends in a real HDFS (a MiniDFSCluster with three DataNodes), reached
through hdfs-native where pyarrow has no libhdfs: a backend's identity marker, writes at
replication 1-3, a lost folder probed down and repaired, a drain, gc of a killed write."""

from __future__ import annotations

from datetime import timedelta

from balance_lake import assert_whole, rows

from airflow_colocate.core.contract import Source
from airflow_colocate.jobs.backends import change_state
from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.jobs.write import prepare_write
from airflow_colocate.storage import fs, identity

DAYS = ("2026-11-01", "2026-11-02")


def files_under(root: str) -> set[str]:
    from airflow_colocate.storage.fs import _arrow
    from pyarrow.fs import FileSelector, FileType

    filesystem, path = _arrow(root)
    return {i.path for i in filesystem.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
            if i.type == FileType.File and i.path.endswith(".parquet")}


def test_hdfs_backends_write_lose_a_folder_repair_drain_and_collect(hdfs_lake):
    lake = hdfs_lake
    for b in lake.catalog.backends.list():
        assert identity.read_marker(b.root_uri)["backend_id"] == b.id
    for replicas in (1, 2, 3):
        lake.create(f"t{replicas}", group=f"g{replicas}", replicas=replicas)
        lake.write(f"t{replicas}", DAYS[0], range(120))
        assert_whole(lake.catalog, f"g{replicas}")
    lake.create("orders")
    for day in DAYS:
        lake.write("orders", day, range(200))
    before = rows(lake.catalog, "default.orders")

    be2 = lake.catalog.backends.get("be2")
    fs.delete_tree(be2.root_uri)
    results = {r.backend.name: r for r in probe_backends(lake.catalog, timeout=20)}
    assert not results["be2"].ok and "missing" in results["be2"].error
    lake.clock.advance(minutes=31)
    lake.run()
    assert_whole(lake.catalog, "g")
    assert rows(lake.catalog, "default.orders") == before
    assert not fs.exists(be2.root_uri)  # the repair did not bring the lost folder back

    lake.add_backend("be4")
    lake.add_backend("be5")  # the replication-3 group needs three alive hosts besides be3
    change_state(lake.catalog, "be3", "decommission", reason="hardware refresh")
    lake.run()
    assert lake.names["be3"] not in {be for ids in lake.catalog.groups.get("g").bucket_map for be in ids}
    assert rows(lake.catalog, "default.orders") == before

    # a write killed after placing its files and before its commit: gc removes them
    roots = [b.root_uri for b in lake.catalog.backends.list() if b.state == "alive"]
    committed = set().union(*(files_under(r) for r in roots))
    ticket, plan = prepare_write(lake.catalog, "orders", DAYS[1], Source(format="parquet", path=str(lake.root)),
                                 work_dir=lake.work)
    for b in plan.buckets:
        for r in b.replicas:
            with fs.open_write(fs.join(r.path, f"part-killed_{b.bucket_seq:05d}.c000.snappy.parquet")) as f:
                f.write(b"half a write")
    assert set().union(*(files_under(r) for r in roots)) - committed
    lake.clock.advance(hours=25)
    collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    lake.clock.advance(hours=2)
    result = collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    assert not result.failed
    assert set().union(*(files_under(r) for r in roots)) == committed
    assert rows(lake.catalog, "default.orders") == before
