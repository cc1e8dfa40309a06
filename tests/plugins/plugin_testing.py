"""Helpers for the plugin tests (conftest fixtures cannot be imported by name)."""

from __future__ import annotations

from pathlib import Path

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReplicaReport, WriteReport


def commit_fake_write(cat: Catalog, table: str, partition: str, *, bytes_per_replica: int = 1000) -> None:
    """Commit a partition version as the Spark write job would report it (no files are needed by
    the catalog), so that backends hold verified replicas with sizes."""
    ticket = cat.writes.begin(table, partition)
    targets = {seq: [be for be, _ in bucket] for seq, bucket in enumerate(ticket.targets)}
    cat.writes.set_targets(ticket.job_id, targets, ticket.missing, {})
    replicas = [ReplicaReport(seq, be, f"{root}/{table}/{partition}/v{ticket.version}/b{seq}", ["part-0.parquet"],
                              10, bytes_per_replica, f"{seq:064x}")
                for seq, bucket in enumerate(ticket.targets) for be, root in bucket]
    cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), ticket.table.qualified_name, partition,
                                                ticket.version, 10 * len(ticket.targets), replicas, 0.1, "test"))


def build_demo_catalog(url: str, root: Path) -> Catalog:
    """Four backends (one down), two groups in ``default`` and one global, committed data."""
    cat = Catalog(url, actor="pytest")
    cat.init()
    for i in range(1, 5):
        (root / f"be{i}").mkdir(parents=True, exist_ok=True)
        cat.backends.add((root / f"be{i}").as_uri(), name=f"be{i}", capacity_bytes=100_000 * i)
    cat.tables.create("orders", [("o_orderkey", "bigint"), ("dt", "date")], ["o_orderkey"], bucket_num=8,
                     replication_num=2, partition_cols=["dt"], colocate_with="g_orders")
    cat.tables.create("lineitem", [("l_orderkey", "bigint"), ("l_qty", "decimal(15,2)"), ("dt", "date")], ["l_orderkey"],
                     bucket_num=8, replication_num=2, partition_cols=["dt"], colocate_with="g_orders")
    cat.tables.create("users", [("user_id", "int"), ("name", "string")], ["user_id"], bucket_num=4,
                     replication_num=1, colocate_with="g_users")
    cat.tables.create("dim.region", [("r_id", "int")], ["r_id"], bucket_num=2, replication_num=1,
                     colocate_with="__global__regions")
    commit_fake_write(cat, "orders", "2026-11-01", bytes_per_replica=2000)
    commit_fake_write(cat, "lineitem", "2026-11-01", bytes_per_replica=5000)
    commit_fake_write(cat, "users", "all", bytes_per_replica=700)
    cat.backends.set_state("be4", "down", reason="test: disk failed")
    # A running relocate job of g_users: bucket 3 leaves be4 for be1.
    users = cat.groups.get("g_users")
    new_map = [list(r) for r in users.bucket_map]
    new_map[3] = [1]
    job = cat.balance.create(users.grp_id, "relocate", {
        "old_map": [list(r) for r in users.bucket_map], "new_map": new_map,
        "moves": [{"bucket_seq": 3, "src": 4, "dst": 1, "bytes": 700}]})
    cat.balance.begin(job.id)
    return cat
