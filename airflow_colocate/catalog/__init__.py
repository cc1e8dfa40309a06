"""The colocation catalog: models, migrations and the :class:`Catalog` API."""

from airflow_colocate.catalog.catalog import DEFAULT_DB, FLAGS, Catalog
from airflow_colocate.catalog.views import BackendView, EventView, GroupView, PartitionView, TableView

__all__ = ["Catalog", "DEFAULT_DB", "FLAGS", "BackendView", "EventView", "GroupView", "PartitionView", "TableView"]
