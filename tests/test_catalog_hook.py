"""The ``colocate`` connection as Airflow resolves it (issue 27, strict configuration): connections
come from ``AIRFLOW_CONN_*`` variables and from a real custom secrets backend configured through
``AIRFLOW__SECRETS__BACKEND``; nothing of the hook is mocked."""

from __future__ import annotations

import json
import uuid

import pytest
import structlog.testing
from airflow.secrets import BaseSecretsBackend
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.hooks.catalog import ColocateCatalogHook


class VaultDown(BaseSecretsBackend):
    """A secrets backend whose server cannot be reached, as a Vault or AWS outage looks."""

    def get_conn_value(self, conn_id: str, team_name: str | None = None) -> str | None:
        raise ConnectionError("vault.example.com:8200: connection refused")


@pytest.fixture
def airflow_secrets(monkeypatch, tmp_path):
    """A clean place: no colocate connection or catalog URL from the environment, and the SDK's
    memoised secrets backends dropped before and after, so a configured backend is really used."""
    from airflow.sdk.configuration import clear_secrets_backends_cache

    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    monkeypatch.delenv("AIRFLOW__SECRETS__BACKEND", raising=False)
    monkeypatch.delenv("AIRFLOW__WORKERS__SECRETS_BACKEND", raising=False)
    clear_secrets_backends_cache()
    yield monkeypatch
    clear_secrets_backends_cache()


def test_a_missing_connection_falls_back_to_the_embedded_catalog_and_warns(airflow_secrets, tmp_path):
    hook = ColocateCatalogHook("colocate_nowhere")
    with structlog.testing.capture_logs() as logs:  # a hook logs through the task SDK's structlog
        url = hook.catalog_url()
    embedded = tmp_path / "home" / "catalog.db"
    assert url == f"sqlite:///{embedded}" and hook.source == "embedded default"
    warnings = [e["event"] % e.get("positional_args", ()) for e in logs if e["log_level"] == "warning"]
    assert any("colocate_nowhere" in w and str(embedded) in w for w in warnings), warnings
    Catalog(url).init()
    assert hook.work_dir() == str(tmp_path / "home" / "runs")


def test_a_secrets_backend_error_fails_with_that_error(airflow_secrets, tmp_path):
    """The SDK logs a backend's exception at DEBUG and reports the connection as not defined; the
    hook must not read that as 'no connection' and open a private SQLite catalog instead."""
    airflow_secrets.setenv("AIRFLOW__SECRETS__BACKEND", f"{__name__}.VaultDown")
    hook = ColocateCatalogHook("colocate_prod")
    with pytest.raises(ColocateError) as err:
        hook.get_conn()
    message = str(err.value)
    assert "\n" not in message
    assert "'colocate_prod'" in message and "ConnectionError: vault.example.com:8200: connection refused" in message
    assert isinstance(err.value.__cause__, ConnectionError)
    assert not (tmp_path / "home").exists()  # no embedded catalog was created on the way


def test_a_connection_in_the_environment_wins_over_a_failing_later_lookup(airflow_secrets, tmp_path):
    """Airflow's own order: a backend that fails is skipped when another one has the connection."""
    url = f"sqlite:///{tmp_path / 'env.db'}"
    Catalog(url).init()
    airflow_secrets.setenv("AIRFLOW__SECRETS__BACKEND", f"{__name__}.VaultDown")
    airflow_secrets.setenv("AIRFLOW_CONN_COLOCATE_ENV", json.dumps({"conn_type": "colocate", "extra": {"catalog_url": url}}))
    hook = ColocateCatalogHook("colocate_env")
    assert hook.catalog_url() == url and hook.source == "connection colocate_env"
    assert hook.get_conn().backends.list() == []


def test_the_work_dir_stays_a_uri(airflow_secrets, tmp_path):
    """``Path('hdfs://nn:8020/w')`` is the local folder ``hdfs:/nn:8020/w``: the hook hands the URI on as is."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    Catalog(url).init()
    airflow_secrets.setenv("AIRFLOW_CONN_COLOCATE_HDFS", json.dumps(
        {"conn_type": "colocate", "extra": {"catalog_url": url, "work_dir": "hdfs://nn:8020/colocate/work"}}))
    assert ColocateCatalogHook("colocate_hdfs").work_dir() == "hdfs://nn:8020/colocate/work"


PASSWORD = "p@ss:/%w#rd"


@pytest.mark.postgres
def test_a_user_and_password_with_url_characters_reach_postgresql(airflow_secrets, pg_server_url):
    """Login and password go through the connection's own fields. The test server trusts loopback
    logins, so the role must exist under its exact name, and the driver is asked what password it
    sent: a URL built by string formatting breaks both at the first '@'."""
    server = make_url(pg_server_url)
    suffix = uuid.uuid4().hex[:8]
    user, database = f"co@l:o/c%{suffix}", f"hook_{suffix}"
    admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE ROLE \"{user}\" LOGIN PASSWORD '{PASSWORD}'"))
        c.execute(text(f'CREATE DATABASE "{database}" OWNER "{user}"'))
    admin.dispose()
    airflow_secrets.setenv("AIRFLOW_CONN_COLOCATE_PG", json.dumps(
        {"conn_type": "colocate", "host": server.host, "port": server.port, "login": user, "password": PASSWORD,
         "schema": database}))
    hook = ColocateCatalogHook("colocate_pg")
    url = make_url(hook.catalog_url())
    assert (url.username, url.password, url.host, url.port, url.database) == (user, PASSWORD, server.host, server.port, database)
    setup = Catalog(hook.catalog_url())
    setup.init()
    setup.dispose()
    catalog = hook.get_conn()
    try:
        assert catalog.backends.list() == []
        with catalog.engine.connect() as c:
            assert c.scalar(text("select current_user")) == user
            assert c.connection.driver_connection.info.password == PASSWORD
        assert PASSWORD not in catalog.engine.url.render_as_string(hide_password=True)
    finally:
        catalog.dispose()
