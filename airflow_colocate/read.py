"""Query catalog tables from your own Spark code.

    from airflow_colocate.read import register
    register(spark, {"orders": ["2026-11-01"], "lineitem": None})
    spark.sql("SELECT ... FROM orders JOIN lineitem ON o_orderkey = l_orderkey")

Tables of one stable group read bucket *b* from the same backend, so Spark joins them on the bucket
key without a shuffle. Runs on the Spark driver, which needs catalog access; Spark jobs launched
by the operators get a plan instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_colocate.catalog import Catalog
from airflow_colocate.placement.replica_choice import choose_replicas
from airflow_colocate.planning import read_table
from airflow_colocate.plans import ReadTable


def plan_reads(catalog: Catalog, tables: Mapping[str, Sequence[str] | None]) -> list[ReadTable]:
    """One ReadTable per catalog table; one replica choice per group, shared by its tables."""
    available = {b.id for b in catalog.backends() if b.state == "alive"}
    choices: dict[str, list[int]] = {}
    out = []
    for name, partitions in tables.items():
        view, replicas = catalog.read_replicas(name, partitions)
        chosen = None
        if view.group_id is not None:
            if view.group_id not in choices:
                choices[view.group_id] = choose_replicas(catalog.group(view.group_id).bucket_map, available)
            chosen = choices[view.group_id]
        out.append(read_table(view, replicas, available=available, chosen=chosen, name=name.rpartition(".")[2]))
    return out


def register(spark, tables: Mapping[str, Sequence[str] | None], *, catalog: Catalog | None = None) -> list[ReadTable]:
    """Register ``tables`` (name -> partition values, or None for all committed) in ``spark``."""
    from airflow_colocate.spark.register import register_tables

    plans = plan_reads(catalog or Catalog(), tables)
    register_tables(spark, plans)
    return plans
