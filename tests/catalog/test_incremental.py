"""Incremental stability checks and the bucket summaries behind them, on SQLite and PostgreSQL.

A check reuses its last answer when nothing it reads changed; a write, a clone, a drop (of
replicas or of a table), a map switch and a backend state change each make the next check of the
groups they touch compute again, and leave every other group's answer reused. The summaries stay
equal to a recount of the replica rows through every kind of change."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

import pytest
from colocate_testing import add_local_backends
from sqlalchemy import event

from airflow_colocate.catalog import Catalog, summary
from airflow_colocate.catalog import models as m
from airflow_colocate.core.contract import (
    CloneResult,
    ReplicaReport,
    Source,
    VerifyResult,
    WriteReport,
)
from airflow_colocate.planner.write import write_plan

COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.t


def write(cat: Catalog, table: str, value: str, salt: str = "") -> None:
    """One write through the catalog's write path; the report is what the write job would send."""
    ticket = cat.writes.begin(table, value)
    plan = write_plan(ticket, Source(format="parquet", path="file:///nowhere"), "file:///nowhere/runs")
    cat.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                          ticket.missing, {"staging_uri": plan.staging_uri})
    replicas = []
    for b in plan.buckets:
        rows = 10 + b.bucket_seq
        checksum = hashlib.sha256(f"{table}/{value}/{b.bucket_seq}/{salt}".encode()).hexdigest()
        replicas += [ReplicaReport(b.bucket_seq, r.backend_id, r.path, ["f"], rows, 100 * rows + len(salt), checksum)
                     for r in b.replicas]
    cat.writes.commit(ticket.job_id, WriteReport(plan.job_id, plan.table, value, ticket.version, 0, replicas, 0.0, "test"))


def drift(cat: Catalog) -> list[str]:
    return cat.tx(summary.drift)


class Two(Catalog):
    """A catalog with groups g1 (tables a, b) and g2 (table c), replication 1 on disjoint
    backends, and a fifth backend that no map names; ``used`` holds each group's backends."""

    clock: Clock
    used: dict[str, set[int]]


@pytest.fixture
def two(catalog_url, tmp_path):
    clock = Clock()
    cat = Two(catalog_url, actor="pytest", clock=clock)
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=4)
    for name, group in (("a", "g1"), ("b", "g1"), ("c", "g2")):
        cat.tables.create(name, COLUMNS, ["id"], bucket_num=2, replication_num=1, partition_cols=["dt"], colocate_with=group)
    (tmp_path / "backends" / "be5").mkdir()
    cat.backends.add((tmp_path / "backends" / "be5").as_uri(), name="be5")
    for table in ("a", "b", "c"):
        for day in ("2026-11-01", "2026-11-02"):
            write(cat, table, day)
    cat.clock = clock
    cat.used = {g: {be for row in cat.groups.get(g).bucket_map for be in row} for g in ("g1", "g2")}
    assert not cat.used["g1"] & cat.used["g2"] and 5 not in cat.used["g1"] | cat.used["g2"], cat.used
    assert [h.reused for h in cat.health.check_groups()] == [False, False]
    assert [h.reused for h in cat.health.check_groups()] == [True, True]
    yield cat
    cat.dispose()


def reused(cat: Catalog) -> dict[str, bool]:
    return {g: cat.health.check_group(g).reused for g in ("g1", "g2")}


def backend_name(cat: Catalog, be: int) -> str:
    return next(b.name for b in cat.backends.list() if b.id == be)


def test_an_unchanged_check_costs_a_few_small_queries(two):
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(two.engine, "before_cursor_execute", record)
    try:
        health = two.health.check_group("g1")
    finally:
        event.remove(two.engine, "before_cursor_execute", record)
    assert health.reused and health.stable
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(reads) <= 12, reads
    assert not [s for s in statements if "replicas" in s or "partitions" in s], statements


def test_a_reused_answer_is_the_one_a_fresh_computation_gives(two):
    cat = two
    write(cat, "a", "2026-11-01", salt="again")
    cat.backends.set_state(backend_name(cat, min(cat.used["g1"])), "down", reason="disk")
    first = cat.health.check_group("g1")
    again = cat.health.check_group("g1")
    assert not first.reused and again.reused
    cat.tx(lambda s: s.query(m.GroupCheck).delete())
    fresh = cat.health.check_group("g1")
    assert not fresh.reused
    assert (fresh.stable, fresh.reasons, fresh.problems) == (again.stable, again.reasons, again.problems)
    assert not fresh.stable and "is down since" in fresh.reason


def test_a_write_invalidates_its_group_only(two):
    write(two, "a", "2026-11-03")
    assert reused(two) == {"g1": False, "g2": True}
    assert reused(two) == {"g1": True, "g2": True}
    assert drift(two) == []


def test_a_backend_state_change_invalidates_the_groups_whose_map_names_it(two):
    cat = two
    outside = backend_name(cat, 5)
    cat.backends.set_state(outside, "down", reason="maintenance")
    assert reused(cat) == {"g1": True, "g2": True}
    be = backend_name(cat, min(cat.used["g2"]))
    cat.backends.set_state(be, "down", reason="disk")
    assert reused(cat) == {"g1": True, "g2": False}
    assert f"backend {be} is down" in cat.health.check_group("g2").reason
    cat.health.record_probe(be, False, "still down")  # no state change: nothing to recompute
    assert reused(cat) == {"g1": True, "g2": True}
    cat.backends.set_state(be, "alive")
    assert reused(cat) == {"g1": True, "g2": False}
    assert cat.health.check_group("g2").stable


def test_a_clone_invalidates_its_group_only(two):
    cat = two
    g = cat.groups.get("g1")
    dst = 5
    old = [list(r) for r in g.bucket_map]
    new = [[dst] if seq == 0 else row for seq, row in enumerate(old)]
    job = cat.balance.create(g.grp_id, "balance", {"old_map": old, "new_map": new, "moves": [
        {"bucket_seq": 0, "index": 0, "src": old[0][0], "dst": dst, "bytes": 0, "why": "balance"}]})
    cat.balance.begin(job.id)
    assert reused(cat) == {"g1": False, "g2": True}  # the job is a reason of its own
    assert reused(cat) == {"g1": True, "g2": True}
    needs, blocked = cat.balance.clone_needs(job.id)
    assert blocked == [] and {(n.table, n.partition, n.bucket_seq, n.backend_id) for n in needs} == {
        (t, d, 0, dst) for t in ("default.a", "default.b") for d in ("2026-11-01", "2026-11-02")}
    first = needs[0]
    cat.balance.register_clones(job.id, [CloneResult("k", first.partition_id, first.version, 0, dst, first.sources[0][0],
                                             first.path, True, first.rows, first.bytes, first.checksum)])
    assert reused(cat) == {"g1": False, "g2": True}
    assert drift(cat) == []
    assert len(cat.balance.clone_needs(job.id)[0]) == len(needs) - 1
    assert [c for c, _ in cat.balance.move_progress(job.id)] == [first.bytes]


def test_a_drop_of_replicas_invalidates_its_group_only(two):
    cat = two
    g = cat.groups.get("g1")
    dst = 5
    old = [list(r) for r in g.bucket_map]
    new = [[dst] if seq == 0 else row for seq, row in enumerate(old)]
    job = cat.balance.create(g.grp_id, "balance", {"old_map": old, "new_map": new, "moves": [
        {"bucket_seq": 0, "index": 0, "src": old[0][0], "dst": dst, "bytes": 0, "why": "balance"}]})
    cat.balance.begin(job.id)
    needs, _ = cat.balance.clone_needs(job.id)
    cat.balance.register_clones(job.id, [CloneResult(f"k{i}", n.partition_id, n.version, 0, dst, n.sources[0][0], n.path, True,
                                             n.rows, n.bytes, n.checksum) for i, n in enumerate(needs)])
    assert cat.balance.switch_map(job.id).switched
    done = cat.balance.finish(job.id, grace=timedelta(minutes=10))
    assert done.done and done.health.stable
    assert cat.balance.close(job.id, grace=timedelta(minutes=10)) == len(needs)
    assert cat.balance.snapshot().groups[0].redundant == 0  # marked: no longer counted as redundant
    assert reused(cat) == {"g1": True, "g2": True}
    assert drift(cat) == []
    cat.clock.t += timedelta(minutes=11)
    items = cat.balance.take_droppable()
    assert len(items) == len(needs) and {i.backend_id for i in items} == {old[0][0]}
    assert reused(cat) == {"g1": False, "g2": True}
    assert cat.balance.forget_replicas([i.replica_id for i in items]) == len(needs)
    assert reused(cat) == {"g1": False, "g2": True}
    assert cat.health.check_group("g1").stable and drift(cat) == []
    loads = cat.backends.loads()
    assert loads[old[0][0]]["replicas"] == 0 and loads[dst]["replicas"] == len(needs)


def test_a_dropped_table_and_a_forced_map_invalidate_their_group_only(two):
    cat = two
    cat.tables.drop("b")
    assert reused(cat) == {"g1": False, "g2": True}
    cat.tables.recover("b")
    assert reused(cat) == {"g1": False, "g2": True}
    for flag in ("disable_colocate_balance", "disable_colocate_relocate"):
        cat.set_flag(flag, True)
    g2 = cat.groups.get("g2")
    moved = [[5] if seq == 0 else list(row) for seq, row in enumerate(g2.bucket_map)]
    cat.groups.set_bucket_map("g2", moved)
    assert reused(cat) == {"g1": True, "g2": False}
    health = cat.health.check_group("g2")
    assert health.problems == 2 and {r.text.split(":")[0] for r in health.reasons} == {
        f"default.c/{d} v1 bucket 0 on backend be5" for d in ("2026-11-01", "2026-11-02")}
    cat.tables.drop("c", force=True)  # purged: the group goes with its last table
    assert [g.name for g in cat.groups.list()] == ["g1"] and drift(cat) == []


def test_a_bad_replica_invalidates_and_the_summaries_follow_every_change(two):
    cat = two
    victim = next(r for r in cat.health.replicas_to_verify() if r.path.split("/")[-4].startswith("a_"))
    cat.health.record_verify([VerifyResult(victim.replica_id, ok=False, error="checksum differs")])
    assert reused(cat) == {"g1": False, "g2": True}
    health = cat.health.check_group("g1")
    assert health.problems == 1 and "failed its checksum" in health.reasons[0].problem
    assert drift(cat) == []
    write(cat, "a", "2026-11-01", salt="rewrite")  # overwrite: the bad replica's version is superseded
    assert cat.health.check_group("g1").stable and drift(cat) == []
    cat.clock.t += timedelta(hours=2)
    garbage = cat.writes.garbage()
    assert {g.reason for g in garbage} == {"superseded version", "write staging"}
    assert all(g.uri.endswith("/v000001") for g in garbage if g.reason == "superseded version")
    cat.writes.forget_garbage(garbage)
    assert cat.writes.garbage() == [] and drift(cat) == [] and cat.health.check_group("g1").reused
