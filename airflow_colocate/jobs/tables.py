"""Changing a table: every option a user gives at once is applied in one catalog transaction with
one event, or none is, whether it comes from ``colocate table alter`` or the admin API. Dropping,
recovering and purging a table published as an Iceberg table also drop or publish its Iceberg
table, in the order that never leaves an Iceberg snapshot naming a file gc may delete."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import logging
from datetime import timedelta

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.checks import check_duration
from airflow_colocate.core.errors import ColocateError, InvalidArgument
from airflow_colocate.jobs.iceberg import enable, follow, withdraw
from airflow_colocate.model.views import TableView


@dataclass(frozen=True)
class TableChange:
    """What to change; a field left at its default changes nothing. ``retention_days`` 0 keeps
    every partition (as ``--retention-days 0`` and the API's null say)."""

    colocate_with: str | None = None  # a group's name; "" takes the table out of its group
    replication: int | None = None
    add: Sequence[tuple[str, str] | str] = ()
    drop: Sequence[str] = ()
    widen: Sequence[tuple[str, str] | str] = ()
    retention_days: int | None = None
    iceberg: bool | None = None  # publish as an Iceberg table (on) or stop (off)
    iceberg_warehouse: str | None = None

    @property
    def schema(self) -> bool:
        return bool(self.add or self.drop or self.widen)

    def empty(self) -> bool:
        return (self.colocate_with is None and self.replication is None and not self.schema
                and self.retention_days is None and self.iceberg is None)


def alter_table(catalog: Catalog, table: str, change: TableChange, *, db: str | None = None) -> TableView:
    """The table as it is after ``change``, all of it or none (:meth:`Catalog.atomic`)."""
    if change.empty():
        raise InvalidArgument("nothing to alter: give --colocate-with GROUP (or '' to leave the group), --replication N, "
                              "--add-column 'NAME TYPE', --drop-column NAME, --widen-column 'NAME TYPE', --retention-days N or "
                              "--iceberg on|off")
    if change.iceberg_warehouse is not None and change.iceberg is not True:
        raise InvalidArgument("--iceberg-warehouse goes with --iceberg on: it is where the Iceberg metadata is written")
    t = catalog.tables.get(table, db=db)
    with catalog.atomic("table.alter", t.qualified_name):
        if change.colocate_with is not None:
            catalog.tables.alter_colocate_with(table, change.colocate_with, db=db)
        if change.replication is not None:
            catalog.tables.set_replication_num(table, change.replication, db=db)
        if change.schema:
            catalog.schemas.alter(table, add=change.add, drop=change.drop, widen=change.widen, db=db)
        if change.retention_days is not None:
            catalog.partitions.set_retention(table, change.retention_days or None, db=db)
    if change.iceberg is not None:  # after ours: publishing reads the table as it now is
        enable(catalog, t.qualified_name, change.iceberg, warehouse=change.iceberg_warehouse)
    elif change.schema:
        follow(catalog, [t.id])
    return catalog.tables.get(t.id)


log = logging.getLogger("airflow_colocate.iceberg")


def drop_table(catalog: Catalog, table: str, *, force: bool = False, db: str | None = None) -> TableView:
    """Drop a table (``force``: and purge it). A published one is dropped first, then its Iceberg
    table, and only then purged: an Iceberg catalog that cannot be reached leaves it dropped, with
    its pins, for the next purge to finish."""
    t = catalog.tables.get(table, db=db)
    if catalog.iceberg.find(t.id) is None:
        return catalog.tables.drop(table, db=db, force=force)
    view = catalog.tables.drop(table, db=db)
    try:
        withdraw(catalog, t.id, forget=force)
    except Exception as exc:  # noqa: BLE001 - our drop stands; the Iceberg drop is retried by the purge
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        catalog.iceberg.lagging(t.id, f"its Iceberg table could not be dropped: {reason}")
        if force:
            raise ColocateError(f"table {view.qualified_name} dropped but not purged: its Iceberg table could not be "
                                f"dropped ({reason}); 'colocate table purge' finishes once it can") from exc
        log.warning("Iceberg table of %s not dropped yet: %s", view.qualified_name, reason)
        return view
    return catalog.tables.purge(t.id) if force else view


def recover_table(catalog: Catalog, table: str, *, db: str | None = None) -> TableView:
    """Recover a dropped table; a published one is published again (its Iceberg table went with the drop)."""
    view = catalog.tables.recover(table, db=db)
    follow(catalog, [view.id])
    return view


def purge_tables(catalog: Catalog, retention: timedelta) -> list[TableView]:
    """Purge the tables dropped longer than ``retention`` ago, each published one's Iceberg table
    dropped first; one whose Iceberg table cannot be dropped now waits, its files kept, for the
    next purge."""
    check_duration("retention", retention, "24 hours, the default")
    cutoff = catalog.now() - retention
    for t in catalog.tables.list(include_dropped=True):
        if t.state == "dropped" and t.dropped_at is not None and t.dropped_at <= cutoff:
            try:
                withdraw(catalog, t.id, forget=True)
            except Exception as exc:  # noqa: BLE001 - this table waits; the others are purged
                catalog.iceberg.lagging(t.id, f"its Iceberg table could not be dropped: {exc}")
                log.warning("table %s not purged: its Iceberg table could not be dropped: %s", t.qualified_name, exc)
    return catalog.tables.purge_dropped(retention=retention)
