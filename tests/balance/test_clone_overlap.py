"""A repair's clone batches can overlap their registration (issue 29, ``overlap_batches``: by
default as the runner says, ``concurrent_plans``): batch k+1 copies while batch k is registered,
so the catalog's time is off the repair's critical path. Kept from the batches run one after the
other (both ways tested): a batch is registered only after its report, the registrations in batch
order, no batch starts once one failed, and a batch that fails ends the round with every batch
before it registered (a re-run completes)."""

from __future__ import annotations

import shutil
import threading
from datetime import timedelta

import pytest
from balance_lake import assert_whole

from airflow_colocate.catalog import summary
from airflow_colocate.jobs import balance
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.jobs.runners import local_runner


def _lost_disk(lake):
    lake.create("a", buckets=4, replicas=2)
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        lake.write("a", day, range(300))
    shutil.rmtree(lake.root / "backends" / "be2")
    probe_backends(lake.catalog, timeout=10, sample=0)
    lake.clock.advance(minutes=31)  # past the relocate delay


def _balancer(lake, runner, overlap=True):
    return Balancer(lake.catalog, runner, BalanceOptions(grace=timedelta(0), clone_batch_replicas=2, overlap_batches=overlap),
                    work_dir=lake.work)


def test_the_next_batch_copies_while_the_last_one_is_registered(lake, monkeypatch):
    _lost_disk(lake)
    inner, cat = lake.runner, lake.catalog
    events: list[tuple[str, int]] = []
    planned: list[list] = []  # every batch of every clone round, as clone_batches cut them
    started = [threading.Event() for _ in range(64)]
    lock = threading.Lock()
    real_batches = balance.clone_batches

    def clone_batches(*args):
        out = real_batches(*args)
        planned.extend(out)
        return out

    def batch_of(paths: set[str]) -> int:
        (k,) = [i for i, b in enumerate(planned) if {n.path for n in b} == paths]
        return k

    def runner(plan):
        k = batch_of({t.dst for t in plan.copies})
        with lock:
            events.append(("copy", k))
        started[k].set()
        report = inner(plan)
        with lock:
            events.append(("report", k))
        return report

    real_register = cat.balance.register_clones

    def register(job_id, results):
        results = list(results)
        k = batch_of({r.path for r in results})
        with lock:
            events.append(("register", k))
        last_of_round = k + 1 == len(planned)  # a later round's batches are not cut yet
        if not last_of_round:  # the next batch is under way before this one's registration ends
            assert started[k + 1].wait(10), f"batch {k + 1} did not start while batch {k} was registered"
        return real_register(job_id, results)

    monkeypatch.setattr(balance, "clone_batches", clone_batches)
    monkeypatch.setattr(cat.balance, "register_clones", register)
    _balancer(lake, runner).run()
    assert len(planned) >= 4, planned  # several batches: 2 replicas each
    registered = [k for what, k in events if what == "register"]
    assert registered == list(range(len(planned)))  # in batch order, each once
    for k in registered:  # only after its own report
        assert events.index(("report", k)) < events.index(("register", k))
    copies = [k for what, k in events if what == "copy"]
    assert sorted(copies) == registered  # every batch copied once (two start at once: either first)
    assert_whole(cat)
    assert cat.tx(summary.drift) == []


class Boom(RuntimeError):
    pass


def test_overlap_follows_the_runner_unless_asked(lake, monkeypatch):
    monkeypatch.delenv("COLOCATE_OVERLAP_CLONE_BATCHES", raising=False)
    assert BalanceOptions().overlap_batches is None
    monkeypatch.setenv("COLOCATE_OVERLAP_CLONE_BATCHES", "1")
    assert BalanceOptions().overlap_batches is True
    monkeypatch.setenv("COLOCATE_OVERLAP_CLONE_BATCHES", "0")
    assert BalanceOptions().overlap_batches is False

    def plain(plan):  # a runner that says nothing: a spark-submit per batch
        raise AssertionError("not run")

    with local_runner(processes=2) as workers, local_runner(processes=0) as threads:
        depth = {(name, overlap): Balancer(lake.catalog, runner, BalanceOptions(overlap_batches=overlap))._depth()
                 for name, runner in (("plain", plain), ("workers", workers), ("threads", threads))
                 for overlap in (None, True, False)}
    assert depth == {("plain", None): 1, ("plain", True): 2, ("plain", False): 1,
                     ("workers", None): 2, ("workers", True): 2, ("workers", False): 1,
                     ("threads", None): 1, ("threads", True): 2, ("threads", False): 1}


@pytest.mark.parametrize("overlap", [True, False])
def test_a_batch_that_fails_keeps_the_batches_before_it_and_a_rerun_completes(lake, overlap):
    _lost_disk(lake)
    inner, cat = lake.runner, lake.catalog
    ran: list[int] = []

    def runner(plan):
        ran.append(len(plan.copies))
        if len(ran) == 2:
            raise Boom("the clone job of batch 2 failed")
        return inner(plan)

    with pytest.raises(Boom):
        _balancer(lake, runner, overlap).run()
    assert len(ran) == 2  # batch 3 never started
    (job,) = [j for j in cat.jobs.list() if j.kind != "write"]
    assert job.state == "running" and job.progress["cloned"] == ran[0]  # batch 1 registered, batch 2 not
    assert cat.tx(summary.drift) == []
    _balancer(lake, inner, overlap).run()
    assert_whole(cat)
    (job,) = [j for j in cat.jobs.list() if j.kind != "write"]
    assert job.state == "done"


def test_worker_processes_take_the_next_batch_while_one_is_registered(lake, monkeypatch):
    """The local runner in worker processes queues a plan's chunks behind the plan before it
    (``LocalRunner.submit``): two batches are under way while one is registered, each batch's
    report comes back whole, and the registrations go in batch order."""
    from airflow_colocate.jobs import runners

    monkeypatch.setattr(runners, "PROCESS_MIN_TASKS", 2)
    _lost_disk(lake)
    cat = lake.catalog
    lock = threading.Lock()
    outstanding, most, order, registered, beside = [0], [0], [], [], []
    with local_runner(processes=2) as inner:
        assert inner.concurrent_plans == 2

        class Watched:
            concurrent_plans = inner.concurrent_plans

            def __call__(self, plan):
                raise AssertionError("the balance submits plans to a runner that can take them")

            def submit(self, plan):
                order.append(sorted(t.dst for t in plan.copies))
                with lock:
                    outstanding[0] += 1
                    most[0] = max(most[0], outstanding[0])
                future = inner.submit(plan)
                future.add_done_callback(lambda _: done())
                return future

        def done():
            with lock:
                outstanding[0] -= 1

        real_register = cat.balance.register_clones

        def register(job_id, results):
            results = list(results)
            registered.append(sorted(r.path for r in results))
            with lock:
                beside.append(len(order) - len(registered))  # plans submitted and not yet registered
            return real_register(job_id, results)

        monkeypatch.setattr(cat.balance, "register_clones", register)
        Balancer(cat, Watched(), BalanceOptions(grace=timedelta(0), clone_batch_replicas=2), work_dir=lake.work).run()
    assert len(order) >= 3 and most[0] == 2  # two plans under way at once, never more
    # every registration but the last ran with the next batch submitted: it copied meanwhile
    assert beside[:-1] and all(n >= 1 for n in beside[:-1]) and beside[-1] == 0, beside
    assert registered == order  # each report whole, registered in the order the plans were submitted
    assert_whole(cat)
    assert cat.tx(summary.drift) == []


@pytest.mark.parametrize("large", [False, True])
def test_a_large_job_starts_the_clone_workers_ahead(lake, monkeypatch, large):
    """A job that moves at least WARM_MIN_BYTES asks its runner to start the workers before its
    catalog work; a small one (it copies on threads) does not start them for nothing."""
    if large:
        monkeypatch.setattr(balance, "WARM_MIN_BYTES", 1)
    _lost_disk(lake)
    warmed = []
    inner = lake.runner

    class Runner:
        def __call__(self, plan):
            return inner(plan)

        def warm(self):
            warmed.append(True)

    Balancer(lake.catalog, Runner(), BalanceOptions(grace=timedelta(0)), work_dir=lake.work).run()
    assert warmed == ([True] if large else [])
    assert_whole(lake.catalog)
