"""The Catalog: the only code in the package that reads or writes the catalog database.

One :class:`Catalog` per process holds the engine and hands out one small repository per concern,
all sharing its transactions and event log::

    catalog.backends.add(...)      catalog.groups.get(...)      catalog.tables.create(...)
    catalog.writes.begin(...)      catalog.reads.replicas(...)  catalog.health.check_group(...)
    catalog.balance.create(...)    catalog.jobs.list(...)
    catalog.schemas.alter(...)     catalog.partitions.drop(...)  catalog.metrics.read()

Every public method that changes state runs in one transaction, writes one event row with it, and
is retried from the start if it lost a race with another writer (serialization failure on
PostgreSQL, a busy SQLite file, or a unique key taken a moment earlier). Methods return detached
views, never ORM objects.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine

from airflow_colocate.catalog.backends import Backends
from airflow_colocate.catalog.balance_jobs import BalanceJobs
from airflow_colocate.catalog.checks import normalize_root
from airflow_colocate.catalog.groups import Groups
from airflow_colocate.catalog.health import Health
from airflow_colocate.catalog.iceberg import Iceberg
from airflow_colocate.catalog.jobs import Jobs
from airflow_colocate.catalog.metrics import Metrics
from airflow_colocate.catalog.partitions import Partitions
from airflow_colocate.catalog.reads import Reads
from airflow_colocate.catalog.rows import DEFAULT_DB
from airflow_colocate.catalog.schemas import Schemas
from airflow_colocate.catalog.session import FLAGS, CatalogSession
from airflow_colocate.catalog.tables import DEFAULT_RETENTION, Tables
from airflow_colocate.catalog.writes import Writes


class Catalog(CatalogSession):
    """Handle on one catalog database. Cheap to create; share one per process."""

    def __init__(self, url: str | None = None, *, actor: str | None = None,
                 clock: Callable[[], datetime] | None = None, engine: Engine | None = None):
        super().__init__(url, actor=actor, clock=clock, engine=engine)
        self.backends = Backends(self)
        self.groups = Groups(self)
        self.tables = Tables(self)
        self.writes = Writes(self)
        self.reads = Reads(self)
        self.health = Health(self)
        self.balance = BalanceJobs(self)
        self.jobs = Jobs(self)
        self.partitions = Partitions(self)
        self.schemas = Schemas(self)
        self.metrics = Metrics(self)
        self.iceberg = Iceberg(self)


__all__ = ["Catalog", "DEFAULT_DB", "DEFAULT_RETENTION", "FLAGS", "normalize_root"]
