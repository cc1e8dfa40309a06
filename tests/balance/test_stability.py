"""Stability with a reason, on SQLite and PostgreSQL: what the check records, and the job/drop
rules of the catalog that keep a bucket from ever losing its last verified replica."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from airflow_colocate.catalog import Catalog, models
from airflow_colocate.core.contract import VerifyResult
from airflow_colocate.core.errors import Conflict
from balance_lake import Clock, Lake
from colocate_testing import add_local_backends


@pytest.fixture
def small(catalog_url, tmp_path):
    clock = Clock()
    catalog = Catalog(catalog_url, actor="pytest", clock=clock)
    catalog.init()
    add_local_backends(catalog, tmp_path / "backends")
    lake = Lake(catalog, clock, tmp_path)
    lake.names = {b.name: b.id for b in catalog.backends.list()}
    lake.create("orders", buckets=3)
    lake.write("orders", "2026-11-01", range(60))
    yield lake
    catalog.dispose()


def test_migrations_match_the_models(small):
    with small.catalog.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), models.Base.metadata) == []


def test_check_names_table_partition_bucket_and_backend(small):
    cat = small.catalog
    health = cat.health.check_group("g")
    assert health.stable and health.reason is None and health.problems == 0
    _, parts = cat.reads.replicas("orders")
    victim = parts[0].buckets[2][1]
    rid = next(r.replica_id for r in cat.health.replicas_to_verify() if r.path == victim.path)
    cat.health.record_verify([VerifyResult(rid, ok=False, error="checksum differs")])
    assert not cat.groups.get("g").stable  # marked at once
    health = cat.health.check_group("g")
    (reason,) = health.reasons
    be = next(b.name for b in cat.backends.list() if b.id == victim.backend_id)
    assert (reason.table, reason.partition, reason.version, reason.bucket, reason.backend) == (
        "default.orders", "2026-11-01", 1, 2, be)
    assert "failed its checksum" in reason.problem
    assert health.reason == f"default.orders/2026-11-01 v1 bucket 2 on backend {be}: replica failed its checksum (bad)"
    g = cat.groups.get("g")
    assert not g.stable and g.unstable_reason == health.reason
    assert cat.health.group_health("g").reasons == health.reasons  # recorded, readable without a re-check
    assert health.to_dict()["reasons"] == [health.reason]


def test_manual_marks_are_overwritten_by_the_next_check(small):
    cat = small.catalog
    cat.groups.set_stable("g", False, reason="maintenance")
    assert cat.health.check_group("g").stable  # the replicas say it is whole
    cat.backends.set_state("be1", "down")
    cat.groups.set_stable("g", True)
    health = cat.health.check_group("g")
    assert not health.stable and "backend be1 is down" in health.reason
    assert health.changed and [e.kind for e in cat.events(limit=1)] == ["group.check"]
    assert not cat.health.check_group("g").changed  # the same answer again is not a new event
    assert [e.kind for e in cat.events(limit=1)] == ["group.check"]


def test_a_running_job_keeps_the_group_unstable_and_is_unique(small):
    cat = small.catalog
    g = cat.groups.get("g")
    plan = {"old_map": [list(r) for r in g.bucket_map], "new_map": [list(r) for r in g.bucket_map], "moves": []}
    job = cat.balance.create(g.grp_id, "repair", plan)
    with pytest.raises(Conflict, match="already has balance job"):
        cat.balance.create(g.grp_id, "repair", plan)
    assert f"balance job {job.id}" in cat.health.check_group("g").reason
    cat.balance.cancel(job.id, "test")
    assert cat.health.check_group("g").stable
    stale = dict(plan, old_map=[[9, 9]] * 3)
    with pytest.raises(Conflict, match="changed since it was planned"):
        cat.balance.create(g.grp_id, "repair", stale)


def test_switch_waits_for_every_added_replica_and_drops_wait_for_the_grace(small):
    cat = small.catalog
    small.add_backend("be4")
    g = cat.groups.get("g")
    be4 = small.names["be4"]
    new_map = [list(r) for r in g.bucket_map]
    src = new_map[0][0]
    new_map[0][0] = be4
    move = {"bucket_seq": 0, "index": 0, "src": src, "dst": be4, "bytes": 1, "why": "balance"}
    job = cat.balance.create(g.grp_id, "balance", {"old_map": [list(r) for r in g.bucket_map], "new_map": new_map,
                                                        "moves": [move]})
    cat.balance.begin(job.id)
    with pytest.raises(Conflict, match="has not switched"):
        cat.balance.finish(job.id)
    result = cat.balance.switch_map(job.id)
    assert not result.switched and result.missing == ("default.orders/2026-11-01 bucket 0 on backend 4",)
    needs, blocked = cat.balance.clone_needs(job.id)
    assert [(n.bucket_seq, n.backend_id, n.sources[0][0]) for n in needs] == [(0, be4, src)] and not blocked
    from airflow_colocate.core.contract import CloneResult
    from airflow_colocate.planner.clones import clone_plan
    from airflow_colocate.spark.clone_job import clone_task
    from dataclasses import asdict

    (task,) = clone_plan("t", needs, "unused").copies
    res = CloneResult(**clone_task(asdict(task)))
    assert res.ok
    assert cat.balance.register_clones(job.id, [res]) == (1, [])
    assert cat.balance.switch_map(job.id).switched
    assert cat.groups.get("g").bucket_map[0][0] == be4
    small.clock.advance(seconds=1)
    done = cat.balance.finish(job.id, grace=timedelta(minutes=10))
    assert done.done and done.health.stable
    assert cat.balance.close(job.id, grace=timedelta(minutes=10)) == 1
    assert cat.balance.take_droppable() == []  # within the grace the old copy stays for running readers
    small.clock.advance(minutes=11)
    # if the new copy went bad meanwhile, the old one is kept instead of dropped
    rid = next(r.replica_id for r in cat.health.replicas_to_verify() if r.backend_id == be4)
    cat.health.record_verify([VerifyResult(rid, ok=False, error="bit rot")])
    assert cat.balance.take_droppable() == []
    _, parts = cat.reads.replicas("orders")
    assert src in {r.backend_id for r in parts[0].buckets[0]}  # kept, verified, as the repair's source
    assert "replica.drop_start" in [e.kind for e in cat.events(limit=3)]
