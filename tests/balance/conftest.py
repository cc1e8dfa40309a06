"""Fixtures for the repair and balance tests: a lake with three backends and one group.

``lake`` and ``lake_on`` clone with the local runner (the Spark clone job's task function, in this
process): they test the balance loop, not Spark. ``spark_lake`` clones with the Spark clone job in
the test session, for the tests whose point is Spark."""

from __future__ import annotations

import pytest
from balance_lake import Clock, Lake

from airflow_colocate.catalog import Catalog


def _lake(url: str, root, spark=None, backends=("be1", "be2", "be3")):
    clock = Clock()
    cat = Catalog(url, actor="pytest", clock=clock)
    cat.init()
    lk = Lake(cat, clock, root, spark)
    for name in backends:
        lk.add_backend(name)
    return lk


@pytest.fixture
def lake(tmp_path):
    lk = _lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    yield lk
    lk.catalog.dispose()


@pytest.fixture
def spark_lake(tmp_path, spark):
    """The same lake, cloning with the Spark clone job (``session_runner``)."""
    lk = _lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path, spark)
    yield lk
    lk.catalog.dispose()


@pytest.fixture
def lake_on(catalog_url, tmp_path):
    """The same lake on the catalog database the test asks for (``indirect`` over catalog_url)."""
    lk = _lake(catalog_url, tmp_path)
    yield lk
    lk.catalog.dispose()
