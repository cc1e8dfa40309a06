"""The API's answers that several routes share: a group with what happens next and its
unavailable partitions, a table with its unavailable partitions."""

from __future__ import annotations

from datetime import timedelta

from airflow_colocate.catalog import Catalog
from airflow_colocate.model.views import GroupView
from airflow_colocate.plugins.presenters import group_detail, table_detail


def relocate_delay(minutes: float | None) -> timedelta:
    """The delay the balance uses: the query's override (what a maintenance run passed as
    ``relocate_delay_minutes``), else ``COLOCATE_RELOCATE_DELAY_MINUTES``, else 30 minutes."""
    from airflow_colocate.jobs.health import relocate_delay_from_env

    return relocate_delay_from_env() if minutes is None else timedelta(minutes=minutes)


def with_outlook(catalog: Catalog, g: GroupView, base: dict, delay: timedelta, outlooks: dict | None = None) -> dict:
    """A group's answer with since when it is unstable, when relocation starts, whether joins shuffle."""
    found = (outlooks or {}).get(g.grp_id) or catalog.groups.outlook(g.group_id, relocate_delay=delay)
    return dict(base, **found.to_dict())


def group_answer(catalog: Catalog, g: GroupView, delay: timedelta) -> dict:
    """``GroupDetail``: the presenters' detail, the outlook, and its tables' unavailable partitions."""
    lost = catalog.tables.availability().tables
    tables = [{"table": lost[t].table, "unavailable_count": lost[t].count,
               "unavailable_partitions": list(lost[t].partitions), "unavailable_backends": list(lost[t].backends)}
              for t in g.table_ids if t in lost]
    return dict(with_outlook(catalog, g, group_detail(catalog, g), delay), unavailable_tables=tables)


def table_answer(catalog: Catalog, ref: str) -> dict:
    """``TableDetail``: the presenters' detail and the partitions no read can serve now."""
    lost = catalog.tables.unavailable(ref)
    return dict(table_detail(catalog, ref), unavailable_count=lost.count, unavailable_partitions=list(lost.partitions),
                unavailable_backends=list(lost.backends))


__all__ = ["group_answer", "relocate_delay", "table_answer", "with_outlook"]
