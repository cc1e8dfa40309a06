"""``colocate partition``: add, list, drop into the recycle bin, recover, purge, expire by retention."""

from __future__ import annotations

from datetime import date, timedelta

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.output import Table, json_option
from airflow_colocate.core.errors import InvalidArgument


@click.group("partition", cls=Group, help="Partitions of a table: add, list, drop (into the recycle bin), recover, purge, expire.")
def partition() -> None:
    pass


@partition.command("add", help="Add partition VALUE (e.g. 2026-11-01) to TABLE, checked against the group schema.")
@click.argument("table")
@click.argument("value")
@click.option("--buckets", type=params.INT, help="Bucket count (default: the table's).")
@click.option("--replication", type=params.INT, help="Replication number (default: the table's).")
@pass_env
def add_partition(env: Env, table: str, value: str, buckets: int | None, replication: int | None) -> str:
    p = env.catalog().partitions.add(table, value, bucket_num=buckets, replication_num=replication, db=env.db)
    return f"partition {p.value} added to {table} ({p.bucket_num} buckets, replication_num {p.replication_num})"


@partition.command("list", help="The committed partitions of TABLE; --dropped: those in the recycle bin.")
@click.argument("table")
@click.option("--dropped", is_flag=True, help="List the recycle bin instead.")
@json_option
@pass_env
def list_(env: Env, table: str, dropped: bool) -> Table:
    parts = env.catalog().partitions.list(table, dropped=dropped, db=env.db)
    if dropped:
        return Table(["Partition", "DroppedVersion", "DroppedAt"], [[p.value, p.dropped_version, p.dropped_at] for p in parts])
    return Table(["Partition", "BucketsNum", "ReplicationNum", "VisibleVersion"],
                 [[p.value, p.bucket_num, p.replication_num, p.visible_version] for p in parts])


@partition.command("drop", help="Drop partition VALUE of TABLE into the recycle bin (recoverable for a day); --force purges it now. Its files stay for running reads until gc's grace has passed.")
@click.argument("table")
@click.argument("value")
@click.option("--force", is_flag=True, help="Purge now; cannot be recovered.")
@pass_env
def drop(env: Env, table: str, value: str, force: bool) -> str:
    p = env.catalog().partitions.drop(table, value, force=force, db=env.db)
    _follow(env, table)
    if force:
        return f"partition {value} of {table} dropped and purged; 'colocate gc' erases its files after the grace"
    return (f"partition {value} of {table} (v{p.dropped_version}) dropped; "
            f"'colocate partition recover {table} {value}' brings it back within the recycle-bin window")


@partition.command("recover", help="Bring back dropped partition VALUE of TABLE, with the rows it had.")
@click.argument("table")
@click.argument("value")
@pass_env
def recover(env: Env, table: str, value: str) -> str:
    p = env.catalog().partitions.recover(table, value, db=env.db)
    _follow(env, table)
    return f"partition {value} of {table} recovered (v{p.visible_version})"


@partition.command("purge", help="Purge partitions dropped longer than the window ago; 'colocate gc' then erases their files. Lists them.")
@click.option("--window-hours", type=params.HOURS, default=24.0, show_default=True, help="Keep dropped partitions this long.")
@json_option
@pass_env
def purge(env: Env, window_hours: float) -> Table:
    purged = env.catalog().partitions.purge_dropped(retention=timedelta(hours=window_hours))
    return Table(["Table", "Partition", "Version"], [[t, p.value, p.dropped_version] for t, p in purged])


@partition.command("expire", help="Drop into the recycle bin every partition older than its table's retention (--retention-days). The maintenance DAG runs this.")
@click.option("--table", "table", help="Only this table.")
@click.option("--today", help="The day to count from, YYYY-MM-DD (default: today, UTC).")
@json_option
@pass_env
def expire(env: Env, table: str | None, today: str | None) -> Table:
    day = None
    if today is not None:
        try:
            day = date.fromisoformat(today)
        except ValueError:
            raise InvalidArgument(f"invalid --today {today!r}: expected a day such as 2026-11-01") from None
    done = env.catalog().partitions.expire(today=day, table=table, db=env.db)
    for name in sorted({e.table for e in done}):
        _follow(env, name)
    return Table(["Table", "Partition", "RetentionDays"], [[e.table, e.partition, e.retention_days] for e in done])


def _follow(env: Env, table: str) -> None:
    """The table's Iceberg snapshot after our change (when it is published; never failing ours)."""
    from airflow_colocate.jobs.iceberg import follow

    follow(env.catalog(), [env.catalog().tables.get(table, db=env.db).id])
