"""Catalog access for Airflow tasks through a ``colocate`` connection.

Order of precedence: the connection (``colocate_default`` unless told otherwise), then
``COLOCATE_CATALOG_URL``, then the embedded SQLite catalog under ``$COLOCATE_HOME``, so a DAG runs
unchanged from a laptop to a PostgreSQL-backed deployment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import default_url
from airflow_colocate.core.actor import task_actor
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
        try:
            conn = self.get_connection(self.colocate_conn_id)
        except Exception:  # no such connection: AirflowNotFoundException, or no Airflow context at all
            self._source = "COLOCATE_CATALOG_URL" if os.environ.get("COLOCATE_CATALOG_URL") else "embedded default"
            return default_url()
        self._extra = conn.extra_dejson or {}
        self._source = f"connection {self.colocate_conn_id}"
        if self._extra.get("catalog_url"):
            return self._extra["catalog_url"]
        if conn.host:
            auth = f"{conn.login}:{conn.password}@" if conn.password else (f"{conn.login}@" if conn.login else "")
            port = f":{conn.port}" if conn.port else ""
            return f"postgresql+psycopg2://{auth}{conn.host}{port}/{conn.schema or 'colocate'}"
        return default_url()

    def get_conn(self) -> Catalog:
        if self._catalog is None:
            url = self.catalog_url()
            self._catalog = Catalog(url, actor=running_task_actor() or os.environ.get("COLOCATE_ACTOR") or "airflow")
            self._catalog.check_schema()
            self.log.info("colocate catalog from %s: %s", self._source,
                          self._catalog.engine.url.render_as_string(hide_password=True))
        return self._catalog

    def work_dir(self) -> Path:
        """Where plans and reports go; shared storage when Spark runs in cluster deploy mode."""
        if self._catalog is None:
            self.get_conn()
        return Path(self._extra.get("work_dir") or default_work_dir())

    def test_connection(self) -> tuple[bool, str]:
        try:
            cat = self.get_conn()
            return True, f"catalog reachable, {len(cat.groups.list())} groups"
        except Exception as exc:
            return False, str(exc)
