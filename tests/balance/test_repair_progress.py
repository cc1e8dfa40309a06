"""A repair shows its progress while it runs (issue 29): the clone round is cut into batches whose
clones are registered as each ends, so the job's bytes copied, percent and time left move; the
CLI's ``jobs list`` and the page's job rows read them (jobs.balance_outcome.job_progress)."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from types import SimpleNamespace

from balance_lake import assert_whole

from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.balance_outcome import job_progress
from airflow_colocate.planner.clones import clone_batches
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.jobs.runners import local_runner


def _need(n: int, size: int):
    return SimpleNamespace(key=n, bytes=size)  # clone_batches reads the size only


def test_batches_share_the_large_and_the_small_about_both_limits():
    needs = [_need(i, s) for i, s in enumerate([5, 100, 1, 40, 60, 2, 3])]
    batches = clone_batches(needs, max_bytes=100, max_replicas=3)
    # as few batches as both limits allow (211 bytes: 3; 7 replicas: 3), dealt biggest first: within
    # the replica limit, about the byte limit (a batch is its share of the largest, not a bin packing)
    assert [[n.bytes for n in b] for b in batches] == [[100, 5, 1], [60, 3], [40, 2]]
    # one replica far above the byte limit counts as the limit: it does not cut the small ones into
    # batches of a few (64 GiB and 2,000 x 1 MiB at 1 GiB a batch: 3, not 66)
    skewed = [_need(0, 64 << 30)] + [_need(i, 1 << 20) for i in range(1, 2001)]
    batches = clone_batches(skewed, max_bytes=1 << 30, max_replicas=1000)
    assert len(batches) == 3 and sorted(len(b) for b in batches) == [667, 667, 667]
    many = [_need(i, 1000 if i % 50 == 0 else 10) for i in range(500)]  # 10 large, 490 small
    batches = clone_batches(many, max_bytes=10**9, max_replicas=100)
    assert [len(b) for b in batches] == [100] * 5
    assert [sum(n.bytes == 1000 for n in b) for b in batches] == [2] * 5  # every batch its share of the large
    assert sorted(n.key for b in batches for n in b) == list(range(500))
    assert clone_batches([], 10, 10) == []


def test_copies_the_store_makes_itself_go_in_large_batches_of_their_own():
    def need(n, dst, *srcs):
        return SimpleNamespace(key=n, bytes=1 << 20, path=dst, sources=tuple(enumerate(srcs)))

    s3 = [need(i, f"s3a://lake/be3/t/b{i}", f"s3a://lake/be1/t/b{i}", f"s3://lake/be2/t/b{i}") for i in range(2400)]
    local = [need(2400 + i, f"file:///d3/t/b{i}", f"s3a://lake/be1/t/b{i}") for i in range(600)]  # bytes through us
    mixed = [need(3000, "s3a://lake/be3/t/x", "s3a://lake/be1/t/x", "file:///d2/t/x")]  # one source is not S3
    batches = clone_batches(s3 + local + mixed, max_bytes=1 << 30, max_replicas=500, store_copy_replicas=5000)
    # the 601 byte-moving clones in two batches within 500; the 2,400 S3-to-S3 copies in one
    assert [len(b) for b in batches] == [301, 300, 2400]
    assert {n.key for n in batches[-1]} == set(range(2400))
    assert len(clone_batches(s3, 1 << 30, 500, store_copy_replicas=1000)) == 3
    assert len(clone_batches(s3, 1 << 30, 500)) == 5  # without the option every clone is alike


def test_a_lost_disk_repair_reports_percent_and_time_left_as_it_goes(lake):
    for table in ("a", "b"):
        lake.create(table, buckets=4, replicas=2)
        for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
            lake.write(table, day, range(300))
    cat = lake.catalog
    shutil.rmtree(lake.root / "backends" / "be2")
    probe_backends(cat, timeout=10, sample=0)
    lake.clock.advance(minutes=31)  # past the relocate delay
    seen = []
    inner = local_runner()

    def runner(plan):
        (job,) = [j for j in cat.jobs.list() if j.kind != "write" and j.state == "running"]
        lake.clock.advance(seconds=10)  # each batch takes ten seconds of the catalog's clock
        seen.append(job_progress(job, cat.now()))
        return inner(plan)

    Balancer(cat, runner, BalanceOptions(grace=timedelta(0), clone_batch_replicas=3), work_dir=lake.work).run()
    assert len(seen) >= 3, seen
    assert seen[0]["copied_bytes"] == 0 and seen[0]["percent"] == 0.0 and seen[0]["eta_seconds"] is None
    percents = [s["percent"] for s in seen]
    assert percents == sorted(percents) and 0 < percents[-1] < 100  # it moved while the repair ran
    assert all(s["eta_seconds"] > 0 for s in seen[1:]) and seen[-1]["planned_bytes"] > 0
    assert_whole(cat)
    (job,) = [j for j in cat.jobs.list() if j.kind != "write"]
    assert job_progress(job, cat.now()) | {"planned_bytes": 0, "copied_bytes": 0} == {
        "planned_bytes": 0, "copied_bytes": 0, "percent": 100.0, "eta_seconds": 0.0}


def test_jobs_list_shows_percent_and_time_left(lake, monkeypatch, capsys):
    from airflow_colocate.cli import main

    lake.create("a", buckets=4, replicas=2)
    lake.write("a", "2026-11-01", range(300))
    shutil.rmtree(lake.root / "backends" / "be2")
    probe_backends(lake.catalog, timeout=10, sample=0)
    lake.clock.advance(minutes=31)
    lake.run()
    monkeypatch.setenv("COLOCATE_CATALOG_URL", str(lake.catalog.engine.url))
    capsys.readouterr()  # the balance run's lines
    assert main(["jobs", "list", "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out) if r["Kind"] != "write"]
    assert row["Percent"] == 100.0 and row["EtaSeconds"] == 0.0
