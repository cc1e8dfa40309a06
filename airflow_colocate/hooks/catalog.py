"""Catalog access for Airflow tasks through a ``colocate`` connection.

Order of precedence: the connection (``colocate_default`` unless told otherwise), then
``COLOCATE_CATALOG_URL``, then the embedded SQLite catalog under ``$COLOCATE_HOME``, so a DAG runs
unchanged from a laptop to a PostgreSQL-backed deployment.

The fallback is taken only when the connection does not exist, and said at WARNING: a secrets
backend that is down must fail the task, not quietly point a production DAG at a private SQLite
file that has none of the production tables.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from sqlalchemy.engine import URL

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import default_url
from airflow_colocate.core.actor import task_actor
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.paths import default_work_dir


def running_task_actor() -> str | None:
    """``airflow:<dag_id>/<task_id>/<run_id>`` when called inside a running task, so the event
    log's "who" names the task instance that wrote, joined or balanced; None elsewhere."""
    try:
        from airflow.sdk import get_current_context

        ti = get_current_context()["ti"]
        return task_actor(ti.dag_id, ti.task_id, ti.run_id)
    except Exception:  # not in a task (CLI, API server, tests): the caller's default
        return None


def _backend_failure(conn_id: str) -> BaseException | None:
    """The error a configured secrets backend raises for ``conn_id``, if any.

    The SDK's lookup logs a backend's exception at DEBUG and goes on to the next backend, so an
    unreachable Vault ends as the same ``AirflowNotFoundException`` as a connection nobody
    defined. Asking the configured backends again (``[secrets] backend``, the ones that can be
    unreachable: the SDK's own environment and API lookups already answered) tells the two apart."""
    try:
        from airflow.sdk.configuration import ensure_secrets_loaded

        backends = ensure_secrets_loaded(default_backends=[])
    except Exception as exc:  # the backends cannot even be loaded: that is a configuration error too
        return exc
    for backend in backends:
        try:
            if backend.get_connection(conn_id=conn_id) is not None:
                return None  # defined after all (it appeared between the two lookups)
        except Exception as exc:
            return exc
    return None


class ColocateCatalogHook(BaseHook):
    """Connection fields: host/port/schema/login/password of the PostgreSQL catalog, or extra
    ``catalog_url`` with a full SQLAlchemy URL; extra ``work_dir`` is where plans and reports are
    exchanged with Spark (must be visible to the Spark driver)."""

    conn_name_attr = "colocate_conn_id"
    default_conn_name = "colocate_default"
    conn_type = "colocate"
    hook_name = "Colocate catalog"

    def __init__(self, colocate_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.colocate_conn_id = colocate_conn_id
        self._catalog: Catalog | None = None
        self._extra: dict[str, Any] = {}
        self._source = ""

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from airflow_colocate import CONNECTION_FORM

        return {"hidden_fields": CONNECTION_FORM["hidden-fields"], "relabeling": CONNECTION_FORM["relabeling"],
                "placeholders": CONNECTION_FORM["placeholders"]}

    def catalog_url(self) -> str:
        """The catalog URL this hook opens (password included: hand it to SQLAlchemy, never to a log)."""
        conn = self._connection()
        if conn is None:
            url = default_url()
            if os.environ.get("COLOCATE_CATALOG_URL"):
                self._source = "COLOCATE_CATALOG_URL"
            else:
                self._source = "embedded default"
                self.log.warning("no Airflow connection %r: using the embedded SQLite catalog %s (define the "
                                 "connection to use a shared catalog)", self.colocate_conn_id, url.removeprefix("sqlite:///"))
            return url
        self._extra = conn.extra_dejson or {}
        self._source = f"connection {self.colocate_conn_id}"
        if self._extra.get("catalog_url"):
            return self._extra["catalog_url"]
        if conn.host:
            # URL.create quotes what the URL syntax reserves: a password such as 'p@ss:/%w' stays one password.
            return URL.create("postgresql+psycopg2", username=conn.login or None, password=conn.password or None,
                              host=conn.host, port=conn.port or None,
                              database=conn.schema or "colocate").render_as_string(hide_password=False)
        return default_url()

    @property
    def source(self) -> str:
        """Where the last :meth:`catalog_url` found the catalog: ``connection <id>``,
        ``COLOCATE_CATALOG_URL`` or ``embedded default`` (what ``colocate doctor`` reports)."""
        return self._source

    def _connection(self):
        """The Airflow connection, or None when it is not defined anywhere. Any other failure to
        read it (a secrets backend down or denying access) is the task's error."""
        try:
            return self.get_connection(self.colocate_conn_id)
        except AirflowNotFoundException:
            cause = _backend_failure(self.colocate_conn_id)
            if cause is None:
                return None
        except Exception as exc:
            cause = exc
        reason = " ".join(f"{type(cause).__name__}: {cause}".split())
        raise ColocateError(f"cannot read Airflow connection {self.colocate_conn_id!r} for the colocate catalog: "
                            f"{reason} (fix the secrets backend or the connection; the embedded catalog is used "
                            f"only when the connection does not exist)") from cause

    def get_conn(self) -> Catalog:
        if self._catalog is None:
            url = self.catalog_url()
            self._catalog = Catalog(url, actor=running_task_actor() or os.environ.get("COLOCATE_ACTOR") or "airflow")
            self._catalog.check_schema()
            self.log.info("colocate catalog from %s: %s", self._source,
                          self._catalog.engine.url.render_as_string(hide_password=True))
        return self._catalog

    def work_dir(self) -> str:
        """Where plans and reports go; shared storage when Spark runs in cluster deploy mode. A
        string, as :mod:`airflow_colocate.storage.plan_files` takes it: ``Path`` would turn
        ``hdfs://nn/work`` into the local folder ``hdfs:/nn/work``."""
        if self._catalog is None:
            self.get_conn()
        return os.fspath(self._extra.get("work_dir") or default_work_dir())

    def test_connection(self) -> tuple[bool, str]:
        try:
            cat = self.get_conn()
            return True, f"catalog reachable, {len(cat.groups.list())} groups"
        except Exception as exc:
            return False, str(exc)
