"""A slow or hanging backend: every read of be2's files stalls (``slowfs.SlowFs``, whose docstring
says why a FUSE file system spoken to directly is the mechanism here: no device-mapper delay
target in this kernel, no network between us and a local backend for ``tc netem``, no libfuse).
A query through ``jobs.read.query`` returns exactly the written rows, later; a repair whose only
source replicas sit on the stalled backend completes, later, and leaves the group whole."""

from __future__ import annotations

import os
import time

import pytest
from balance_lake import Clock, Lake, assert_whole, rows
from injection import root_or_skip
from slowfs import SlowFs

from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs.read import query

DAYS = ("2026-11-01", "2026-11-02")
STALL = 0.3  # seconds every read request of be2 waits


def _lake(tmp_path, backends, replicas):
    clock = Clock()
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
    catalog.init()
    lake = Lake(catalog, clock, tmp_path)
    for name in backends:
        lake.add_backend(name)
    lake.create("orders", replicas=replicas)
    for day in DAYS:
        lake.write("orders", day, range(2000))
    return lake


def stalled(lake, name: str) -> SlowFs:
    """``name``'s files moved aside and served back at its root through the stalling file system."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("needs /dev/fuse for the stalling file system")
    root_or_skip()
    root = lake.root / "backends" / name
    aside = lake.root / f"{name}-disk"
    root.rename(aside)
    root.mkdir()
    return SlowFs(aside, root, delay=STALL)


@pytest.mark.spark
def test_query_over_a_stalled_backend_returns_every_row(tmp_path, spark):
    lake = _lake(tmp_path, ("be1", "be2"), replicas=1)  # half of the buckets only on be2
    want = sorted((DAYS[0], k) for k in range(2000))
    sql = "SELECT CAST(dt AS STRING), id FROM orders"
    with stalled(lake, "be2") as disk:
        started = time.monotonic()
        got = sorted(tuple(r) for r in query(spark, sql, {"orders": [DAYS[0]]}, catalog=lake.catalog, replace_views=True))
        took = time.monotonic() - started
        assert disk.reads > 0 and took >= STALL
    assert got == want  # every row, once
    lake.catalog.dispose()


def test_repair_reading_from_a_stalled_backend_completes(tmp_path):
    lake = _lake(tmp_path, ("be1", "be2", "be3"), replicas=2)
    before = rows(lake.catalog, "orders")
    on_be1_and_be2 = [seq for seq, ids in enumerate(lake.catalog.groups.get("g").bucket_map) if set(ids) == {1, 2}]
    assert on_be1_and_be2, "no bucket whose only other replica is on be2"
    with stalled(lake, "be2") as disk:
        lake.catalog.backends.decommission("be1")  # its buckets are cloned from the other replica: be2's for some
        started = time.monotonic()
        outcome = lake.run()
        took = time.monotonic() - started
        assert [j.state for j in outcome["jobs"]] == ["done"], outcome["jobs"]
        assert disk.reads > 0 and took >= STALL, (disk.reads, took)
        disk.delay = 0  # the disk recovers: the group is whole, every row where it was
        assert_whole(lake.catalog)
        assert rows(lake.catalog, "orders") == before
    lake.catalog.dispose()
