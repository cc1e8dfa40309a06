"""A clone killed before its registration, whose move no later plan needs, is removed by gc.

The nemesis found it (seed 7001 on PostgreSQL): a relocation's clones were written, the run was
killed before registering them, and the partition was then dropped by retention, so no plan
cloned there again and no replica row named the files. gc left them on the backend for good."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from balance_lake import Killed, assert_whole, dies_after_copying, fingerprint, replica_dirs, rows

from airflow_colocate.catalog import clone_targets
from airflow_colocate.catalog import models as m
from airflow_colocate.jobs.backends import add_backend
from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.storage import fs

TABLES = ("orders", "lineitem")


def catalog_dirs(cat) -> set[str]:
    return {fs.local_path(r.path) for t in cat.tables.list() for p in cat.reads.replicas(t.qualified_name)[1]
            for b in p.buckets for r in b if r.rows}


def gc(cat, grace=timedelta(0)):
    return collect_garbage(cat, grace=grace, stale_after=timedelta(hours=24))


def targets(cat) -> list[tuple[int, str, str]]:
    return cat.tx(lambda s: [(t.job_id, t.state, t.path) for t in s.query(m.CloneTarget).order_by(m.CloneTarget.id)])


def cancel_the_job(cat) -> None:
    [job] = cat.jobs.list(kinds=["balance"])
    cat.balance.cancel(job.id, "cancelled by the test: the move is abandoned")


@pytest.fixture
def killed(lake_on):
    """Two tables of two days, a new empty backend, and a balance run whose clone job copied every
    file and died before the control plane heard of it."""
    lake = lake_on
    for i, table in enumerate(TABLES):
        lake.create(table, buckets=6)
        for d, day in enumerate(("2026-11-01", "2026-11-02")):
            lake.write(table, day, range(d * 5000 + i, d * 5000 + i + 300))
    before = ({t: rows(lake.catalog, t) for t in TABLES}, fingerprint(lake.catalog))
    lake.names["be4"] = add_backend(lake.catalog, lake.backend_root("be4"), name="be4").id  # with its identity marker
    with pytest.raises(Killed):
        dies_after_copying(lake.balancer()).run()
    left = replica_dirs(lake.root) - catalog_dirs(lake.catalog)
    assert left, "the killed clone job left directories no replica row names"
    return lake, before, left


@pytest.mark.parametrize("catalog_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_gc_removes_the_clones_of_an_ended_job_and_keeps_a_running_ones(killed):
    lake, (before_rows, before_sums), left = killed
    cat = lake.catalog
    [job] = cat.jobs.list(kinds=["balance"])
    recorded = targets(cat)
    assert {fs.local_path(p) for _, _, p in recorded} == left  # recorded before the copy
    assert {(j, s) for j, s, _ in recorded} == {(job.id, "planned")}

    # The job is still running: its next round clones into those directories again.
    out = gc(cat)
    assert [i for i in out.items if i.reason == "abandoned clone"] == []
    assert replica_dirs(lake.root) - catalog_dirs(cat) == left

    cat.balance.cancel(job.id, "cancelled by the test: the move is abandoned")
    # ended less than the grace period ago (a cluster may still run a killed driver's tasks): kept
    out = gc(cat, grace=timedelta(hours=1))
    assert [i for i in out.items if i.reason == "abandoned clone"] == []
    lake.clock.advance(hours=2)
    out = gc(cat, grace=timedelta(hours=1))
    removed = {fs.local_path(i.uri) for i in out.items if i.reason == "abandoned clone"}
    assert removed == left
    assert replica_dirs(lake.root) == catalog_dirs(cat)  # nothing left that no row names
    assert targets(cat) == []
    assert {t: rows(cat, t) for t in TABLES} == before_rows

    # A new plan clones there again, and its registered clones' targets are only forgotten.
    summary = lake.run()
    assert summary["groups"][0]["stable"]
    assert_whole(cat)
    kept = catalog_dirs(cat)
    assert replica_dirs(lake.root) == kept
    out = gc(cat)
    assert [i for i in out.items if i.reason == "abandoned clone"] == []
    assert targets(cat) == []
    assert replica_dirs(lake.root) == kept
    assert fingerprint(cat) == before_sums
    assert {t: rows(cat, t) for t in TABLES} == before_rows


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_a_balance_holds_back_a_clone_into_a_directory_gc_is_removing(killed):
    lake, (before_rows, _), left = killed
    cat = lake.catalog
    cancel_the_job(cat)
    # gc has claimed the abandoned directories (its transaction) and not deleted them yet
    claimed = cat.writes.garbage(grace=timedelta(0), claim=True)
    assert {fs.local_path(i.uri) for i in claimed if i.reason == "abandoned clone"} == left
    assert {s for _, s, _ in targets(cat)} == {"removing"}

    summary = lake.run()  # plans the same moves again: every clone into a claimed directory waits
    assert not summary["groups"][0]["stable"]
    assert any(clone_targets.HELD_BACK in note for job_out in summary["jobs"] for note in job_out.notes), summary["jobs"]
    assert replica_dirs(lake.root) - catalog_dirs(cat) == left  # nothing cloned into them meanwhile

    out = gc(cat)  # deletes what it claimed, forgets it
    assert {fs.local_path(i.uri) for i in out.items if i.reason == "abandoned clone"} == left
    assert replica_dirs(lake.root) == catalog_dirs(cat)
    summary = lake.run()  # the job goes on and clones them now
    assert summary["groups"][0]["stable"]
    assert_whole(cat)
    assert {t: rows(cat, t) for t in TABLES} == before_rows
    gc(cat)
    assert targets(cat) == []


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_a_dry_run_claims_nothing(killed):
    lake, _, left = killed
    cat = lake.catalog
    cancel_the_job(cat)
    out = collect_garbage(cat, grace=timedelta(0), stale_after=timedelta(hours=24), dry_run=True)
    assert {fs.local_path(i.uri) for i in out.items if i.reason == "abandoned clone"} == left
    assert {s for _, s, _ in targets(cat)} == {"planned"}
    assert replica_dirs(lake.root) - catalog_dirs(cat) == left


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_a_folder_gc_could_not_reach_is_unclaimed_for_the_next(killed):
    lake, _, left = killed
    cat = lake.catalog
    cancel_the_job(cat)
    root = fs.local_path(lake.backend_root("be4"))
    os.rename(root, root + "-away")
    os.mkdir(root)  # its disk unmounted, the empty mount point left: gc skips the backend
    try:
        out = gc(cat)
        assert "be4" in out.unreachable and out.skipped >= len(left)
        assert {s for _, s, _ in targets(cat)} == {"planned"}  # a balance need not wait for the next gc
    finally:
        os.rmdir(root)
        os.rename(root + "-away", root)
    out = gc(cat)
    assert {fs.local_path(i.uri) for i in out.items if i.reason == "abandoned clone"} == left
    assert targets(cat) == []
    assert replica_dirs(lake.root) == catalog_dirs(cat)


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_a_job_cancelled_while_its_batch_copies_registers_nothing(lake_on):
    """An operator cancels the job while a long clone batch runs, and gc, past the grace period,
    removes the batch's folders before the batch ends: the batch must not register replicas there."""
    lake = lake_on
    cat = lake.catalog
    for i, table in enumerate(TABLES):
        lake.create(table, buckets=6)
        lake.write(table, "2026-11-01", range(i, i + 300))
    before = {t: rows(cat, t) for t in TABLES}
    lake.add_backend("be4")
    balancer = lake.balancer()
    runner = balancer.runner
    removed = []

    def slow_batch(plan):
        report = runner(plan)  # the copies are written; the report is not registered yet
        cancel_the_job(cat)
        lake.clock.advance(hours=2)
        removed.extend(i.uri for i in gc(cat, grace=timedelta(hours=1)).items if i.reason == "abandoned clone")
        return report

    balancer.runner = slow_batch
    balancer.run()
    assert removed, "gc removed the cancelled job's folders"
    assert {j.state for j in cat.jobs.list(kinds=["balance"])} == {"cancelled"}
    for t in cat.tables.list():  # no replica row names a folder gc removed
        for p in cat.reads.replicas(t.qualified_name)[1]:
            for bucket in p.buckets:
                for r in bucket:
                    assert r.path not in removed and os.path.isdir(fs.local_path(r.path)), r.path
    assert replica_dirs(lake.root) == catalog_dirs(cat)
    assert {t: rows(cat, t) for t in TABLES} == before
