"""Versioned partitions in the catalog: commit checks the report, old versions stay readable until gc."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main
from airflow_colocate.core.contract import ReplicaReport, Source, WriteReport
from airflow_colocate.core.errors import ColocateError, PlacementError
from airflow_colocate.planner.write import write_plan
from colocate_testing import add_local_backends


def fake_job(ticket, payload: bytes) -> WriteReport:
    """Do what the Spark job does, by hand: one file per bucket replica, then the report."""
    plan = write_plan(ticket, Source(format="parquet", path="/unused"), "/tmp/unused")
    replicas = []
    for bucket in plan.buckets:
        data = payload + bytes([bucket.bucket_seq])
        digest = hashlib.sha256(f"f.parquet:{hashlib.sha256(data).hexdigest()}\n".encode()).hexdigest()
        for target in bucket.replicas:
            d = Path(target.path.removeprefix("file://"))
            d.mkdir(parents=True)
            (d / "f.parquet").write_bytes(data)
            replicas.append(ReplicaReport(bucket.bucket_seq, target.backend_id, target.path, ["f.parquet"], 10, len(data), digest))
    return plan, WriteReport(plan.job_id, ticket.table.qualified_name, ticket.partition_value, ticket.version, 10 * len(plan.buckets), replicas, 0.1, "test")


@pytest.fixture
def clocked(catalog_url, tmp_path):
    now = [datetime(2026, 11, 1, tzinfo=timezone.utc)]
    cat = Catalog(catalog_url, actor="pytest", clock=lambda: now[0])
    cat.init()
    add_local_backends(cat, tmp_path / "b")
    cat.tables.create("orders", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=3, replication_num=2,
                     partition_cols=["dt"], colocate_with="g")
    yield cat, now
    cat.dispose()


def commit(cat, payload=b"v", mode="overwrite"):
    ticket = cat.writes.begin("orders", "2026-11-01", mode=mode)
    plan, report = fake_job(ticket, payload)
    cat.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                          ticket.missing, {"staging_uri": plan.staging_uri})
    return ticket, report


def test_commit_flips_version_and_gc_removes_superseded(clocked):
    cat, now = clocked
    t1, r1 = commit(cat, b"one")
    cat.writes.commit(t1.job_id, r1)
    t2, r2 = commit(cat, b"two")
    assert cat.partitions.list("orders", empty=True)[0].visible_version == 1  # staging is invisible
    cat.writes.commit(t2.job_id, r2)
    assert cat.partitions.list("orders", empty=True)[0].visible_version == 2
    old_dirs = [r.path for r in r1.replicas]
    assert cat.writes.garbage() == []  # superseded, but readers get an hour of grace
    now[0] += timedelta(hours=2)
    garbage = cat.writes.garbage()
    assert {p.rsplit("/", 1)[0] for p in old_dirs} <= {g.uri for g in garbage if g.version == 1}
    from airflow_colocate.storage import fs
    for g in garbage:
        fs.delete_tree(g.uri)
    cat.writes.forget_garbage(garbage)
    assert all(not Path(p.removeprefix("file://")).exists() for p in old_dirs)
    assert all(Path(r.path.removeprefix("file://")).exists() for r in r2.replicas)
    assert cat.writes.garbage() == []


def test_report_that_disagrees_is_refused_and_aborts(clocked):
    cat, _ = clocked
    t1, r1 = commit(cat)
    r1.replicas[0].checksum = "0" * 64
    with pytest.raises(ColocateError, match="bucket 0 replicas differ.*previous version stays visible|previous version stays visible"):
        cat.writes.commit(t1.job_id, r1)
    assert cat.partitions.list("orders", empty=True)[0].visible_version == 0
    assert cat.jobs.get(t1.job_id).state == "failed"
    t2, r2 = commit(cat)
    r2.replicas.pop()
    with pytest.raises(ColocateError, match="expected"):
        cat.writes.commit(t2.job_id, r2)


def test_append_that_raced_an_overwrite_is_refused(clocked):
    cat, _ = clocked
    t1, r1 = commit(cat)
    cat.writes.commit(t1.job_id, r1)
    ta, ra = commit(cat, b"a", mode="append")
    assert ta.base_version == 1 and all(p for b in ta.base_paths for p in b)
    to, ro = commit(cat, b"o")
    cat.writes.commit(to.job_id, ro)
    with pytest.raises(ColocateError, match="while this append ran"):
        cat.writes.commit(ta.job_id, ra)


def test_dead_write_is_aborted_and_collected_after_stale_period(clocked):
    cat, now = clocked
    t1, r1 = commit(cat)  # never committed: the job "died"
    now[0] += timedelta(hours=25)
    garbage = cat.writes.garbage()  # marks it aborted
    now[0] += timedelta(hours=2)
    garbage = cat.writes.garbage()
    assert {g.reason for g in garbage} >= {"aborted version"}
    with pytest.raises(ColocateError, match="not running"):
        cat.writes.commit(t1.job_id, r1)


def test_write_needs_enough_alive_backends(clocked):
    cat, _ = clocked
    cat.backends.set_state("be1", "down")
    cat.backends.set_state("be2", "down")
    with pytest.raises(PlacementError, match="needs 2 alive backends"):
        cat.writes.begin("orders", "2026-11-01")


def test_gc_cli_dry_run_and_run(clocked, capsys):
    cat, now = clocked
    t1, r1 = commit(cat)
    cat.writes.commit(t1.job_id, r1)
    t2, r2 = commit(cat)
    cat.writes.commit(t2.job_id, r2)
    assert main(["--catalog", cat.url, "gc", "--grace-minutes", "0", "--dry-run", "--json"]) == 0
    assert all(Path(r.path.removeprefix("file://")).exists() for r in r1.replicas)
    assert main(["--catalog", cat.url, "gc", "--grace-minutes", "0"]) == 0
    assert not any(Path(r.path.removeprefix("file://")).exists() for r in r1.replicas)


def test_commit_writes_commits_many_in_one_transaction_and_refuses_each_bad_one_alone(clocked):
    """A bulk import's batch: good reports become visible together, a report that disagrees is
    aborted on its own (its partition keeps its version), an unknown or finished job is refused."""
    from airflow_colocate.core.errors import Conflict, NotFound

    cat, _ = clocked
    tickets = {}
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        ticket = cat.writes.begin("orders", day)
        plan, report = fake_job(ticket, day.encode())
        cat.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                              ticket.missing, {"staging_uri": plan.staging_uri})
        tickets[day] = (ticket, report)
    bad_ticket, bad_report = tickets["2026-11-02"]
    bad_report.replicas[0].checksum = "0" * 64
    good = [tickets[d] for d in ("2026-11-01", "2026-11-03")]
    items = [(t.job_id, r) for t, r in (*good, (bad_ticket, bad_report))] + [(999_999, good[0][1])]
    out = cat.writes.commit_many(items)
    assert [out[t.job_id].visible_version for t, _ in good] == [1, 1]
    assert isinstance(out[bad_ticket.job_id], ColocateError) and "replicas differ" in str(out[bad_ticket.job_id])
    assert isinstance(out[999_999], NotFound)
    visible = {p.value: p.visible_version for p in cat.partitions.list("orders", empty=True)}
    assert visible == {"2026-11-01": 1, "2026-11-02": 0, "2026-11-03": 1}
    assert [j.state for j in cat.jobs.list(kinds=["write"], limit=10) if j.id == bad_ticket.job_id] == ["failed"]
    again = cat.writes.commit_many([(good[0][0].job_id, good[0][1])])  # committed already: refused, nothing changes
    assert isinstance(again[good[0][0].job_id], Conflict)
    assert {p.value: p.visible_version for p in cat.partitions.list("orders", empty=True)} == visible
