"""The clone job makes a batch durable at once (issue 29: one ``syncfs`` per batch instead of one
``fsync`` per file) and keeps the crash rule of a copy fsynced file by file: a clone's bytes are
durable before they get their final name, the names are durable before the result says ``ok``,
and only an ``ok`` result is registered. A crash between the copies and the registration leaves
nothing registered, no committed replica touched, and a re-run completes the repair."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta

import pytest
from balance_lake import assert_whole, replica_dirs

from airflow_colocate.catalog import summary
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.spark import clone_job
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import durability
from airflow_colocate.storage import fs


class Crash(BaseException):
    """The process dies here (not an error a task could catch and report)."""


def _lost_disk(lake):
    lake.create("a", buckets=4, replicas=2)
    for day in ("2026-11-01", "2026-11-02"):
        lake.write("a", day, range(400))
    shutil.rmtree(lake.root / "backends" / "be2")
    probe_backends(lake.catalog, timeout=10, sample=0)
    lake.clock.advance(minutes=31)  # past the relocate delay: the next run relocates be2's buckets


def _balance(lake, **kwargs):
    return Balancer(lake.catalog, lake.runner, BalanceOptions(grace=timedelta(0), **kwargs), work_dir=lake.work).run()


def _verified(lake) -> dict[str, str]:
    """What a reader sees: every verified replica's path and checksum."""
    return {r.path: r.checksum for t in lake.catalog.tables.list()
            for p in lake.catalog.reads.replicas(t.qualified_name)[1] for bucket in p.buckets for r in bucket}


def _drift(lake) -> list[str]:
    return lake.catalog.tx(summary.drift)


@pytest.fixture(params=["staged", "in place"])
def way(request, monkeypatch):
    """Both ways a lost disk's new replicas are written: staged in the tmp area and renamed, or in
    place in the directories their clones make (the default for a new replica)."""
    monkeypatch.setattr(clone_job, "IN_PLACE", request.param == "in place")
    return request.param


def test_bytes_are_durable_before_their_name_and_names_before_the_result(lake, monkeypatch, way):
    _lost_disk(lake)
    events: list[tuple[str, object]] = []
    real_durable, real_publish = durability.make_durable, copy_mod.publish
    monkeypatch.setattr(durability, "make_durable", lambda uris, watch=None: (events.append(("durable", set(uris))), real_durable(uris, watch))[1])
    monkeypatch.setattr(copy_mod, "publish", lambda st: (events.append(("publish", st)), real_publish(st))[1])
    inner = lake.runner

    def runner(plan):
        report = inner(plan)
        events.append(("report", report))
        return report

    Balancer(lake.catalog, runner, BalanceOptions(grace=timedelta(0), clone_batch_replicas=3), work_dir=lake.work).run()
    assert_whole(lake.catalog)
    published = [e for e in events if e[0] == "publish"]
    assert published and sum(1 for e in events if e[0] == "report") >= 2  # several batches
    assert {e[1].in_place for e in published} == {way == "in place"}  # a new replica: in place unless told not to
    for i, (kind, what) in enumerate(events):
        if kind == "publish" and not what.in_place:  # its bytes were in a make_durable call before the rename
            assert any(k == "durable" and what.tmp in uris for k, uris in events[:i]), what
        if kind == "report":  # every ok clone's directory was made durable after its files were renamed
            last = max(j for j, e in enumerate(events[:i]) if e[0] == "publish")
            made = set().union(*(u for k, u in events[last:i] if k == "durable"))
            for c in what.copies:
                assert not c.ok or c.path in made, c.path
                # written in place: its files' bytes in that same pass (names and bytes durable together)
                assert not c.ok or way == "staged" or {fs.local_path(fs.join(c.path, n)) for n in c.files} <= made
    if way == "in place":  # one syncfs pass per batch: no bytes-before-rename pass, nothing staged
        assert not any("/_colocate/tmp/" in fs.local_path(p) for k, uris in events if k == "durable" for p in uris)
    assert _drift(lake) == []


@pytest.mark.parametrize("way, where", [("staged", "before the rename"), ("staged", "after the rename"),
                                        ("in place", "before the one pass")])
def test_a_crash_between_the_copies_and_the_registration_registers_nothing_and_a_rerun_completes(lake, monkeypatch,
                                                                                                  way, where):
    _lost_disk(lake)
    before = _verified(lake)
    calls = []
    real = durability.make_durable

    def crash(uris, watch=None):
        uris = list(uris)
        calls.append(uris)
        # staged: the 1st call is the bytes, the 2nd the names; in place, the one call is both
        if where == "before the rename" or len(calls) == 2 or way == "in place":
            raise Crash(f"killed {where}")
        real(uris, watch)

    monkeypatch.setattr(clone_job, "IN_PLACE", way == "in place")
    monkeypatch.setattr(durability, "make_durable", crash)
    with pytest.raises(Crash):
        _balance(lake)
    staged = calls[0]
    assert staged and all(("/_colocate/tmp/" in u) == (way == "staged") for u in staged if "." in fs.basename(u))
    assert _verified(lake) == before  # nothing registered: the readers' view is unchanged
    job = [j for j in lake.catalog.jobs.list() if j.kind != "write"][0]
    assert job.state == "running" and (job.progress or {}).get("cloned", 0) == 0
    on_disk = {fs.local_path(p) for p in before}
    if where == "before the rename" and way == "staged":  # no data file outside the registered replicas
        assert all(fs.exists(u) for u in staged)
        assert replica_dirs(lake.root) <= on_disk
    else:  # in directories that no catalog row names as verified: invisible to readers
        assert replica_dirs(lake.root) - on_disk
    for path, checksum in before.items():  # the committed replicas on the alive backends are untouched
        if fs.exists(path):
            files = [(n, copy_mod.sha256_file(fs.join(path, n))) for n, _ in replica_dir.replica_files(path)]
            assert replica_dir.replica_checksum(files) == checksum, path
    monkeypatch.setattr(durability, "make_durable", real)
    _balance(lake)  # the re-run: clones again over whatever the crash left, registers, switches
    assert_whole(lake.catalog)
    assert _drift(lake) == []


def test_a_batch_whose_bytes_cannot_be_made_durable_publishes_nothing_and_is_retried(lake, monkeypatch, way):
    _lost_disk(lake)
    failures = []
    real = durability.make_durable

    def once(uris, watch=None):
        uris = list(uris)
        if not failures:
            failures.append(uris)
            raise OSError(5, "Input/output error")
        real(uris, watch)

    real_finish, left = clone_job.finish_clones, []

    def finish(staged, watch=None):
        results = real_finish(staged, watch)
        if failures and not left:  # the batch whose pass failed: what it wrote, right after it failed
            left.append([fs.local_path(st.tmp) for c in staged for st in c.files])
            left.append([p for p in left[0] if os.path.exists(p)])
        return results

    monkeypatch.setattr(durability, "make_durable", once)
    monkeypatch.setattr(clone_job, "finish_clones", finish)
    _balance(lake)  # the failed batch's clones come back not ok; the next round clones them again
    assert failures and left[0] and left[1] == []  # its staged (or in-place) files were removed
    assert_whole(lake.catalog)
    assert _drift(lake) == []

