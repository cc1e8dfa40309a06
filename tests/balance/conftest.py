"""Fixtures for the repair and balance tests: a lake with three backends and one group."""

from __future__ import annotations

import pytest

from airflow_colocate.catalog import Catalog
from balance_lake import Clock, Lake


@pytest.fixture
def lake(tmp_path, spark):
    clock = Clock()
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
    cat.init()
    lk = Lake(cat, clock, tmp_path, spark)
    for name in ("be1", "be2", "be3"):
        lk.add_backend(name)
    yield lk
    cat.dispose()


@pytest.fixture
def lake_on(catalog_url, tmp_path, spark):
    """The same lake on the catalog database the test asks for (``indirect`` over catalog_url)."""
    clock = Clock()
    cat = Catalog(catalog_url, actor="pytest", clock=clock)
    cat.init()
    lk = Lake(cat, clock, tmp_path, spark)
    for name in ("be1", "be2", "be3"):
        lk.add_backend(name)
    yield lk
    cat.dispose()
