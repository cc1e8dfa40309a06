"""A balance killed after each of its steps, and a write killed part-way through placing its
objects, on backends in a bucket of a real S3 API: the next run finishes the balance with every
row and nothing left behind; the killed write's objects are collected by gc, the committed
partition keeps its rows, and the write run again commits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from balance_lake import Killed, assert_whole, fingerprint, kill_at, rows
from test_s3_control_plane import data_objects

from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import fs

STEPS = ["planned", "unstable", "cloned", "switched", "finished", "dropping", "dropped"]
DAYS = ("2026-11-01", "2026-11-02")


@pytest.mark.parametrize("step", STEPS)
def test_a_balance_killed_after_each_step_is_finished_by_the_next_run(s3_lake, s3_server, step):
    lake = s3_lake
    for i, table in enumerate(("orders", "lines")):
        lake.create(table, buckets=4)
        lake.write(table, DAYS[0], range(i, i + 200))
    before = ({t: rows(lake.catalog, t) for t in ("orders", "lines")}, fingerprint(lake.catalog))
    lake.add_backend("be4")
    with pytest.raises(Killed):
        lake.run(on_step=kill_at(step))
    summary = lake.run()
    assert summary["groups"][0]["stable"]
    assert_whole(lake.catalog)
    assert ({t: rows(lake.catalog, t) for t in ("orders", "lines")}, fingerprint(lake.catalog)) == before
    load = {be: sum(row.count(be) for row in lake.catalog.groups.get("g").bucket_map) for be in lake.names.values()}
    assert sorted(load.values()) == [2, 2, 2, 2]
    # nothing left behind once the drops ran: exactly the catalog's replica files are in the store
    named = {fs.join(r.path, n).split("://", 1)[1] for t in lake.catalog.tables.list()
             for p in lake.catalog.reads.replicas(t.qualified_name)[1] for b in p.buckets for r in b
             for n, _ in r.files or ()}
    lake.clock.advance(hours=1)
    collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    assert data_objects(s3_server, lake) == named


class KilledWrite(Exception):
    pass


@pytest.mark.parametrize("placed", [0, 3, 7])
def test_a_write_killed_while_placing_objects_loses_nothing(s3_lake, s3_server, placed):
    lake = s3_lake
    lake.create("orders")
    lake.write("orders", DAYS[0], range(100))
    committed, good = data_objects(s3_server, lake), rows(lake.catalog, "default.orders")
    real, count = copy_mod._stage_on_object_store, [0]

    def dying(*args, **kwargs):  # the writer process dies once `placed` objects of 8 are in the store
        if count[0] == placed:
            raise KilledWrite(f"killed after {placed} objects")
        count[0] += 1
        return real(*args, **kwargs)

    copy_mod._stage_on_object_store = dying
    try:
        with pytest.raises(KilledWrite):
            lake.write("orders", DAYS[0], range(1000, 1100))  # an overwrite of the committed day
    finally:
        copy_mod._stage_on_object_store = real
    assert rows(lake.catalog, "default.orders") == good  # the committed version is what reads see
    lake.clock.advance(hours=25)
    collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    lake.clock.advance(hours=2)
    collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    assert data_objects(s3_server, lake) == committed
    lake.write("orders", DAYS[0], range(1000, 1100))
    assert rows(lake.catalog, "default.orders") == {DAYS[0]: sorted((k, f"orders-{DAYS[0]}-{k}") for k in range(1000, 1100))}
