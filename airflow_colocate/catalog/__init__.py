"""The colocation catalog: models, migrations and the :class:`Catalog` API.

``Catalog`` is loaded on first use, so that pure code (planners, the Spark jobs) can import the
plain views in :mod:`airflow_colocate.model.views` without loading SQLAlchemy.
"""

from __future__ import annotations

from airflow_colocate.model.views import BackendView, EventView, GroupView, PartitionView, TableView

_LAZY = {"Catalog", "DEFAULT_DB", "FLAGS"}


def __getattr__(name: str):
    if name in _LAZY:
        from airflow_colocate.catalog import catalog

        return getattr(catalog, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Catalog", "DEFAULT_DB", "FLAGS", "BackendView", "EventView", "GroupView", "PartitionView", "TableView"]
