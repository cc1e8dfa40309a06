"""Query catalog tables from your own Spark code.

    from airflow_colocate.jobs.read import register
    register(spark, {"orders": ["2026-11-01"], "lineitem": None})
    spark.sql("SELECT ... FROM orders JOIN lineitem ON o_orderkey = l_orderkey")

Tables of one stable group read bucket *b* from the same backend, so Spark joins them on the bucket
key without a shuffle. Each bucket's replica is checked against its recorded files before it is
registered; a replica that is not exact is marked bad in the catalog and the next one is used (or
the registration fails naming the bucket). Runs on the Spark driver, which needs catalog access;
Spark jobs launched by the operators get a plan instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReadTable
from airflow_colocate.planner.reads import JoinReads, plan_reads


def read_plans(catalog: Catalog, tables: Mapping[str, Sequence[str] | None], *,
               disabled: bool = False, executor_hosts: Sequence[str] | None = None) -> JoinReads:
    """Read what the pure read planner needs from the catalog (the tables' replicas, their groups,
    the alive backends, the global flag) and let it decide: one place for joins and user reads."""
    reads = {name.rpartition(".")[2]: catalog.writes.read_replicas(name, partitions) for name, partitions in tables.items()}
    group_ids = {view.group_id for view, _ in reads.values() if view.group_id}
    groups = {gid: catalog.groups.get(gid) for gid in group_ids}
    backends = catalog.backends.list()
    available = {b.id for b in backends if b.state == "alive"}
    disabled = disabled or catalog.flags()["disable_colocate_join"]
    return plan_reads(reads, groups, available=available, disabled=disabled, hosts={b.id: b.host for b in backends},
                      executor_hosts=executor_hosts)


def register(spark, tables: Mapping[str, Sequence[str] | None], *, catalog: Catalog | None = None) -> list[ReadTable]:
    """Register ``tables`` (name -> partition values, or None for all committed) in ``spark``;
    returns them as registered (each bucket's checked replica in ``bucket_paths``)."""
    from airflow_colocate.spark.register import UnreadableBuckets, register_tables

    catalog = catalog or Catalog()
    plans = read_plans(catalog, tables).tables
    try:
        registered = register_tables(spark, plans)
    except UnreadableBuckets as exc:
        if exc.bad:
            catalog.health.mark_replicas_bad(exc.bad)
        raise
    if registered.bad:
        catalog.health.mark_replicas_bad(registered.bad)
    return registered.tables
