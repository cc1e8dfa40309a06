"""The clone job makes a batch durable at once (issue 29: one ``syncfs`` per batch instead of one
``fsync`` per file) and keeps the crash rule of a copy fsynced file by file: a clone's bytes are
durable before they get their final name, the names are durable before the result says ``ok``,
and only an ``ok`` result is registered. A crash between the copies and the registration leaves
nothing registered, no committed replica touched, and a re-run completes the repair."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from balance_lake import assert_whole, replica_dirs

from airflow_colocate.catalog import summary
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.storage import copy as copy_mod
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
            for p in lake.catalog.writes.read_replicas(t.qualified_name)[1] for bucket in p.buckets for r in bucket}


def _drift(lake) -> list[str]:
    return lake.catalog.tx(summary.drift)


def test_bytes_are_durable_before_their_name_and_names_before_the_result(lake, monkeypatch):
    _lost_disk(lake)
    events: list[tuple[str, object]] = []
    real_durable, real_publish = copy_mod.make_durable, copy_mod.publish
    monkeypatch.setattr(copy_mod, "make_durable", lambda uris, watch=None: (events.append(("durable", set(uris))), real_durable(uris, watch))[1])
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
    for i, (kind, what) in enumerate(events):
        if kind == "publish":  # its bytes were in a make_durable call before the rename
            assert any(k == "durable" and what.tmp in uris for k, uris in events[:i]), what
        if kind == "report":  # every ok clone's directory was made durable after its files were renamed
            last = max(j for j, e in enumerate(events[:i]) if e[0] == "publish")
            dirs = set().union(*(u for k, u in events[last:i] if k == "durable"))
            for c in what.copies:
                assert not c.ok or c.path in dirs, c.path
    assert _drift(lake) == []


@pytest.mark.parametrize("where", ["before the rename", "after the rename"])
def test_a_crash_between_the_copies_and_the_registration_registers_nothing_and_a_rerun_completes(lake, monkeypatch,
                                                                                                  where):
    _lost_disk(lake)
    before = _verified(lake)
    calls = []
    real = copy_mod.make_durable

    def crash(uris, watch=None):
        uris = list(uris)
        calls.append(uris)
        if where == "before the rename" or len(calls) == 2:  # the 1st call is the bytes, the 2nd the names
            raise Crash(f"killed {where}")
        real(uris, watch)

    monkeypatch.setattr(copy_mod, "make_durable", crash)
    with pytest.raises(Crash):
        _balance(lake)
    staged = calls[0]
    assert staged and all("/_colocate/tmp/" in u for u in staged)
    assert _verified(lake) == before  # nothing registered: the readers' view is unchanged
    job = [j for j in lake.catalog.jobs.list() if j.kind != "write"][0]
    assert job.state == "running" and (job.progress or {}).get("cloned", 0) == 0
    on_disk = {fs.local_path(p) for p in before}
    if where == "before the rename":  # no data file outside the registered replicas: the bytes are in tmp areas
        assert all(fs.exists(u) for u in staged)
        assert replica_dirs(lake.root) <= on_disk
    else:  # renamed into directories that no catalog row names as verified: invisible to readers
        assert replica_dirs(lake.root) - on_disk
    for path, checksum in before.items():  # the committed replicas on the alive backends are untouched
        if fs.exists(path):
            files = [(n, copy_mod.sha256_file(fs.join(path, n))) for n, _ in copy_mod.replica_files(path)]
            assert copy_mod.replica_checksum(files) == checksum, path
    monkeypatch.setattr(copy_mod, "make_durable", real)
    _balance(lake)  # the re-run: clones again over whatever the crash left, registers, switches
    assert_whole(lake.catalog)
    assert _drift(lake) == []


def test_a_batch_whose_bytes_cannot_be_made_durable_publishes_nothing_and_is_retried(lake, monkeypatch):
    _lost_disk(lake)
    failures = []
    real = copy_mod.make_durable

    def once(uris, watch=None):
        uris = list(uris)
        if not failures:
            failures.append(uris)
            raise OSError(5, "Input/output error")
        real(uris, watch)

    monkeypatch.setattr(copy_mod, "make_durable", once)
    _balance(lake)  # the failed batch's clones come back not ok; the next round clones them again
    assert failures and not any(fs.exists(u) for u in failures[0])  # its staged files were removed
    assert_whole(lake.catalog)
    assert _drift(lake) == []

