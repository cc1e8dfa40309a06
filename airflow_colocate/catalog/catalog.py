"""The Catalog API: the only code in the package that reads or writes the catalog database.

Every public method that changes state runs in one transaction, writes one event row with it, and
is retried from the start if it lost a race with another writer (serialization failure on
PostgreSQL, a busy SQLite file, or a unique key taken a moment earlier). Methods return detached
views, never ORM objects.

:class:`Catalog` is the one facade callers use; each concern lives in a module of its own and is
mixed in here, so a reader finds backends in ``backends.py``, writes in ``writes.py`` and so on.
"""

from __future__ import annotations

from airflow_colocate.catalog.backends import BackendsMixin
from airflow_colocate.catalog.balance_jobs import BalanceJobsMixin
from airflow_colocate.catalog.checks import normalize_root
from airflow_colocate.catalog.groups import GroupsMixin
from airflow_colocate.catalog.health import HealthMixin
from airflow_colocate.catalog.session import DEFAULT_DB, FLAGS, CatalogSession
from airflow_colocate.catalog.tables import DEFAULT_RETENTION, TablesMixin
from airflow_colocate.catalog.writes import WritesMixin


class Catalog(BackendsMixin, GroupsMixin, TablesMixin, WritesMixin, HealthMixin, BalanceJobsMixin, CatalogSession):
    """Handle on one catalog database. Cheap to create; share one per process."""


__all__ = ["Catalog", "DEFAULT_DB", "DEFAULT_RETENTION", "FLAGS", "normalize_root"]
