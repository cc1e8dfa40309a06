"""A lost disk never looks alive, and no read ever returns fewer rows than were committed (issue 18):
a backend's whole root is deleted while its group is stable; the probe marks it down because its
identity marker is gone (and does not recreate it), joins fall back with that reason and return
every row, and after the relocate delay balance repairs the group, colocated again."""

from __future__ import annotations

import shutil

import pytest
from balance_lake import Clock, Lake, assert_whole

from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs.backends import add_backend
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.jobs.join import join_in_session

pytestmark = pytest.mark.spark

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
QUERY = "SELECT a.dt, a.id, b.v FROM a JOIN b ON a.dt = b.dt AND a.id = b.id"


def test_deleted_root_is_down_joins_fall_back_with_every_row_then_repair(tmp_path, spark):
    clock = Clock()
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
    catalog.init()
    lake = Lake(catalog, clock, tmp_path)  # backends added as a user does, with identity markers:
    for name in ("be1", "be2", "be3"):
        (tmp_path / "backends" / name).mkdir(parents=True)
        lake.names[name] = add_backend(lake.catalog, (tmp_path / "backends" / name).as_uri(), name=name).id
    for table in ("a", "b"):
        lake.create(table, buckets=4, replicas=2)
        for day in DAYS:
            lake.write(table, day, range(300))
    tables = {"a": DAYS, "b": DAYS}
    first = join_in_session(spark, lake.catalog, QUERY, tables, work_dir=tmp_path / "runs")
    assert first["colocate"] and first["rows"] == 900

    shutil.rmtree(tmp_path / "backends" / "be2")  # the disk is gone
    results = {r.backend.name: r for r in probe_backends(lake.catalog, timeout=10)}
    assert not results["be2"].ok and "is missing" in results["be2"].error
    assert not (tmp_path / "backends" / "be2").exists()
    fallback = join_in_session(spark, lake.catalog, QUERY, tables, work_dir=tmp_path / "runs")
    assert fallback["rows"] == 900 and not fallback["colocate"]
    assert "group is not stable" in fallback["explain"] and "be2" in fallback["explain"]

    lake.clock.advance(minutes=31)  # past the relocate delay: be2's buckets move to be1 and be3
    lake.run()
    assert_whole(lake.catalog)
    assert lake.names["be2"] not in {be for ids in lake.catalog.groups.get("g").bucket_map for be in ids}
    again = join_in_session(spark, lake.catalog, QUERY, tables, work_dir=tmp_path / "runs")
    assert again["colocate"] and again["rows"] == 900
    lake.catalog.dispose()
