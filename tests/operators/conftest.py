"""A real environment for operator tests: a SQLite catalog, three local backends, and
``spark-submit`` on ``local[2]`` through an Airflow connection from the environment."""

from __future__ import annotations

import json

import pytest

from airflow_colocate.catalog import Catalog
from colocate_testing import add_local_backends


@pytest.fixture
def colocate_env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark", "host": "local[2]",
        "extra": {"spark-binary": "spark-submit"}}))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    yield cat
    cat.dispose()
