"""``colocate table``: tables, their colocation group, their schema versions and retention
(``colocate partition`` is :mod:`.partitions`)."""

from __future__ import annotations

from datetime import timedelta

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.output import Bullets, Fields, Report, Table, json_option
from airflow_colocate.core.sqltypes import parse_columns


@click.group("table", cls=Group, help="Tables: create, alter, drop, recover, list, show. --colocate-with puts a table in a colocation group.")
def table() -> None:
    pass


@table.command("create", help="Create a table, optionally in a colocation group. TABLE is a name or db.table; a missing group is created from it (it becomes the parent table).")
@click.argument("table")
@click.option("--columns", required=True, help="Column definitions, e.g. 'o_orderkey bigint, o_orderdate date, ...'.")
@click.option("--distributed-by", required=True, help="Bucket key column(s), comma separated.")
@click.option("--buckets", type=params.INT, required=True, help="Bucket count.")
@click.option("--replication", type=params.INT, default=1, show_default=True, help="Replicas of each bucket.")
@click.option("--partition-by", help="Partition column(s), comma separated.")
@click.option("--colocate-with", help="Group name; created from this table when missing.")
@click.option("--if-not-exists", is_flag=True, help="Succeed without change when the table exists.")
@click.option("--retention-days", type=params.DAYS, help="Drop partitions dated older than N days (the maintenance DAG applies it).")
@pass_env
def create(env: Env, table: str, columns: str, distributed_by: str, buckets: int, replication: int,
           partition_by: str | None, colocate_with: str | None, if_not_exists: bool, retention_days: int | None) -> str:
    t = env.catalog().tables.create(table, parse_columns(columns), params.names(distributed_by), bucket_num=buckets,
                                   replication_num=replication, partition_cols=params.names(partition_by),
                                   colocate_with=colocate_with, db=env.db, if_not_exists=if_not_exists,
                                   retention_days=retention_days or None)
    where = f" in colocation group {t.group_name} ({t.group_id})" if t.group_id else ""
    return f"table {t.qualified_name} (id {t.id}) created{where}"


@table.command("alter", help="Move a table to another group, set its replication or retention, or change its columns "
               "(a new schema version; no file is rewritten). --colocate-with '' takes it out of its group.")
@click.argument("table")
@click.option("--colocate-with", help="Group to move to; '' takes the table out of its group.")
@click.option("--replication", type=params.INT, help="New replication number, checked against the group schema.")
@click.option("--add-column", "add_columns", multiple=True, metavar="'NAME TYPE'",
              help="Add a column, e.g. 'discount double'; older partitions read it as null. Repeatable.")
@click.option("--drop-column", "drop_columns", multiple=True, metavar="NAME",
              help="Drop a column from every read (its name cannot be taken again). Repeatable.")
@click.option("--widen-column", "widen_columns", multiple=True, metavar="'NAME TYPE'",
              help="Widen a column losslessly: int->bigint, float->double, decimal precision up, date->timestamp_ntz. Repeatable.")
@click.option("--retention-days", type=params.DAYS, help="Drop partitions dated older than N days; 0 keeps every partition.")
@click.option("--iceberg", type=click.Choice(["on", "off"]), help="Publish the table as an Iceberg table after each commit (on).")
@click.option("--iceberg-warehouse", metavar="URI", help="With --iceberg on: the folder for its Iceberg metadata.")
@pass_env
def alter(env: Env, table: str, colocate_with: str | None, replication: int | None, add_columns: tuple[str, ...],
          drop_columns: tuple[str, ...], widen_columns: tuple[str, ...], retention_days: int | None,
          iceberg: str | None, iceberg_warehouse: str | None) -> str:
    from airflow_colocate.jobs.tables import TableChange, alter_table

    change = TableChange(colocate_with=colocate_with, replication=replication, add=add_columns, drop=drop_columns,
                         widen=widen_columns, retention_days=retention_days,
                         iceberg=None if iceberg is None else iceberg == "on", iceberg_warehouse=iceberg_warehouse)
    t = alter_table(env.catalog(), table, change, db=env.db)
    retention = f"{t.retention_days} days" if t.retention_days else "none"
    published = ""
    if iceberg is not None:
        pub = env.catalog().iceberg.get(t.id)
        published = (", Iceberg table off" if not pub.enabled else f", Iceberg table lags: {pub.lag_reason}"
                     if pub.lag_reason else f", Iceberg table at snapshot {pub.snapshot_id or '(none: no rows yet)'} "
                     f"under {pub.location}")
    return (f"table {t.qualified_name}: group {t.group_name or '(none)'}, replication_num {t.replication_num}, "
            f"schema v{t.schema_version} ({', '.join(f'{n} {ty}' for n, ty in t.columns)}), retention {retention}"
            f"{published}")


@table.command("drop", help="Drop a table (recoverable for the retention). The retention is one day; --force purges at once.")
@click.argument("table")
@click.option("--force", is_flag=True, help="Purge now; cannot be recovered.")
@pass_env
def drop(env: Env, table: str, force: bool) -> str:
    from airflow_colocate.jobs.tables import drop_table

    t = drop_table(env.catalog(), table, db=env.db, force=force)
    if force:
        return f"table {t.qualified_name} (id {t.id}) dropped and purged"
    return f"table {t.qualified_name} (id {t.id}) dropped; 'colocate table recover {t.qualified_name}' brings it back within the retention"


@table.command("recover", help="Bring back a dropped table.")
@click.argument("table")
@pass_env
def recover(env: Env, table: str) -> str:
    from airflow_colocate.jobs.tables import recover_table

    t = recover_table(env.catalog(), table, db=env.db)
    return f"table {t.qualified_name} (id {t.id}) recovered"


@table.command("purge", help="Erase tables dropped longer than the retention ago. Lists what was erased.")
@click.option("--retention-hours", type=params.HOURS, default=24.0, show_default=True,
              help="Keep dropped tables this long.")
@json_option
@pass_env
def purge(env: Env, retention_hours: float) -> Table:
    from airflow_colocate.jobs.tables import purge_tables

    purged = purge_tables(env.catalog(), timedelta(hours=retention_hours))
    return Table(["TableId", "Table"], [[t.id, t.qualified_name] for t in purged])


@table.command("list", help="List tables.")
@click.option("--all", "include_dropped", is_flag=True, help="Include dropped tables.")
@json_option
@pass_env
def list_(env: Env, include_dropped: bool) -> Table:
    return Table(["TableId", "Table", "DistCols", "PartitionCols", "BucketsNum", "ReplicationNum", "Group", "State"],
                 [[t.id, t.qualified_name, list(t.dist_cols), list(t.partition_cols), t.bucket_num,
                   t.replication_num, t.group_name, t.state] for t in env.catalog().tables.list(include_dropped=include_dropped)])


@table.command("show", help="A table: columns, distribution, group, partitions.")
@click.argument("table")
@json_option
@pass_env
def show(env: Env, table: str) -> Report:
    catalog = env.catalog()
    t = catalog.tables.get(table, db=env.db)
    parts = catalog.partitions.list(table, db=env.db, empty=True)
    lost = catalog.tables.unavailable(t.id, limit=max(len(parts), 1))
    settings = Fields(f"table {t.qualified_name} (id {t.id})", [
        ("columns", ", ".join(f"{n} {ty}" for n, ty in t.columns)),
        ("distributed by", f"{', '.join(t.dist_cols)} into {t.bucket_num} buckets, replication_num {t.replication_num}"),
        ("partitioned by", ", ".join(t.partition_cols) or "(not partitioned)"),
        ("colocate_with", f"{t.group_name or '(none)'}{' (' + t.group_id + ')' if t.group_id else ''}"),
        ("schema version", str(t.schema_version)),
        ("retention", f"{t.retention_days} days" if t.retention_days else "none"),
        ("unavailable", f"{lost.count} partitions: a bucket's last verified copy is on {', '.join(lost.backends)}, "
                        "not alive" if lost.count else "none"),
    ])
    partitions = Table(["Partition", "BucketsNum", "ReplicationNum", "VisibleVersion"],
                       [[p.value, p.bucket_num, p.replication_num, p.visible_version] for p in parts])
    blocks: list = [settings, partitions]
    if lost.count:
        blocks.append(Bullets(list(lost.partitions), heading="unavailable partitions (no read can serve them until "
                                                             f"{' or '.join(lost.backends)} is alive again):"))
    return Report(blocks, data={"table": t, "partitions": parts, "unavailable_count": lost.count,
                                "unavailable_partitions": list(lost.partitions),
                                "unavailable_backends": list(lost.backends)})
