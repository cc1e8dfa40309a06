"""A real Airflow API server app with the colocate plugin, in-process: a temporary AIRFLOW_HOME
with its own metadata database (``airflow db migrate``), the SimpleAuthManager with an admin, an
op and a viewer, and a fresh catalog per test that the plugin finds through
``COLOCATE_CATALOG_URL`` (as it would in a deployment without a ``colocate_default`` connection).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_testing import build_demo_catalog

PASSWORDS = {"admin": "admin-pw", "op": "op-pw", "viewer": "viewer-pw"}
SIMPLE_AUTH = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"


def airflow_env(home: Path) -> dict[str, str]:
    """What an Airflow deployment of the plugin would configure, pointed at ``home``."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{u}" for u in PASSWORDS),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__API_AUTH__JWT_SECRET": "colocate-tests-jwt-secret-" + "0123456789abcdef" * 4,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__SECRET_KEY": "colocate-tests-api-secret-key",
        "AIRFLOW__API__EXPOSE_CONFIG": "False",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
    }


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp("airflow_home")
    for d in ("dags", "plugins", "logs"):
        (home / d).mkdir()
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    env = airflow_env(home)
    run = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env={**os.environ, **env}, cwd=home,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"airflow db migrate failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return home, env


@pytest.fixture(scope="module")
def airflow_app(airflow_home):
    """Airflow's own ``create_app()`` (API server app) with the plugin loaded from its entry point.
    Module-scoped: Airflow's settings point at the temporary home only while a module needs them."""
    from airflow import settings
    from airflow.api_fastapi import app as api_app

    _, env = airflow_home
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        settings.configure_vars()
        settings.reconfigure_orm()
        api_app.purge_cached_app()
        app = api_app.create_app()
        yield app
        api_app.purge_cached_app()
    settings.configure_vars()
    settings.reconfigure_orm()


@pytest.fixture(scope="module")
def client(airflow_app):
    from fastapi.testclient import TestClient

    with TestClient(airflow_app, base_url="http://testserver") as c:
        yield c


@pytest.fixture(scope="module")
def tokens(client) -> dict[str, str]:
    """Real JWTs from Airflow's ``POST /auth/token`` for each user."""
    out = {}
    for user, password in PASSWORDS.items():
        r = client.post("/auth/token", json={"username": user, "password": password})
        assert r.status_code == 201, r.text
        out[user] = r.json()["access_token"]
    return out


@pytest.fixture(scope="module")
def as_user(tokens):
    def headers(user: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[user]}"} if user else {}

    return headers


@pytest.fixture
def demo(tmp_path, monkeypatch, airflow_app):
    """A fresh catalog, and the plugin app re-pointed at it through ``COLOCATE_CATALOG_URL``."""
    from airflow_colocate.plugins import plugin
    from airflow_colocate.plugins.app import CatalogSource

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    cat = build_demo_catalog(url, tmp_path / "backends")
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    old = plugin.app.state.catalogs
    plugin.app.state.catalogs = CatalogSource()  # resolves the URL like a deployment does
    yield cat
    plugin.app.state.catalogs.dispose()
    plugin.app.state.catalogs = old
    cat.dispose()
