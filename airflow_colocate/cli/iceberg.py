"""``colocate iceberg``: publish colocated tables as Iceberg tables now, expire their snapshots.

A table is published after each of our commits once ``colocate table alter T --iceberg on`` turned
it on; ``publish`` is for history (the first snapshot of a table with years of partitions) and for
a table whose Iceberg metadata lags (a failed or killed Iceberg commit after ours)."""

from __future__ import annotations

from datetime import timedelta

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.maintenance import exit_if
from airflow_colocate.cli.output import Bullets


@click.group("iceberg", cls=Group, help="Colocated tables as Iceberg tables: publish (catch up), expire snapshots.")
def iceberg() -> None:
    pass


@iceberg.command("publish", help="Bring TABLE's Iceberg table (every published table without TABLE) up to our "
                 "catalog now: one snapshot with what reads see; nothing when it is up to date. Exit 1 if one lags.")
@click.argument("table", required=False)
@pass_env
def publish(env: Env, table: str | None) -> Bullets:
    from airflow_colocate.jobs.iceberg import publish as publish_tables

    outcomes = publish_tables(env.catalog(), table, db=env.db)
    lines = [o.line() for o in outcomes] or ["no table is published as an Iceberg table ('colocate table alter T "
                                             "--iceberg on' publishes one)"]
    return exit_if(Bullets(lines), [o.line() for o in outcomes if o.error], "iceberg publish")


@iceberg.command("expire", help="Expire the Iceberg snapshots published longer than the retention ago (never the "
                 "current one); gc may then delete the replica folders only they named.")
@click.argument("table", required=False)
@click.option("--retention-hours", type=params.HOURS, default=24.0, show_default=True,
              help="Keep snapshots this long (the recycle-bin window by default).")
@pass_env
def expire(env: Env, table: str | None, retention_hours: float) -> Bullets:
    from airflow_colocate.jobs.iceberg import expire as expire_snapshots

    lines = expire_snapshots(env.catalog(), table, retention=timedelta(hours=retention_hours), db=env.db)
    return Bullets(lines or ["no table is published as an Iceberg table"])
