"""Changing a table: every option a user gives at once is applied in one catalog transaction with
one event, or none is, whether it comes from ``colocate table alter`` or the admin API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.jobs.iceberg import enable, follow
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
