"""Repair with real clone tasks and real files: a backend goes down, is decommissioned, comes
back; a replica is corrupted; a write lands in the middle of a balance. The clones run with the
local runner (the Spark clone job's own task function, in process); test_spark_relocate.py
relocates through the Spark clone job."""

from __future__ import annotations

from pathlib import Path

import pytest
from balance_lake import Killed, assert_whole, fingerprint, kill_at, replica_dirs, rows
from colocate_testing import spark_bucket

from airflow_colocate.catalog.summary import drift
from airflow_colocate.core.contract import Source
from airflow_colocate.jobs.balance import BalanceOptions, describe_plans, plan
from airflow_colocate.jobs.write import prepare_write
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs

DAYS = ["2026-11-01", "2026-11-02"]


def load(lake, tables=("orders", "lineitem"), n=400):
    for i, t in enumerate(tables):
        lake.create(t)
        for d, day in enumerate(DAYS):
            lake.write(t, day, range(d * 10_000 + i, d * 10_000 + i + n * (i + 1)))
    return {t: rows(lake.catalog, t) for t in tables}


def test_backend_down_is_relocated_after_the_delay_and_the_group_is_whole_again(lake):
    before = load(lake)
    sums = fingerprint(lake.catalog)
    lake.add_backend("be4")
    cat = lake.catalog
    be2 = lake.names["be2"]
    cat.backends.set_state("be2", "down", reason="disk died")
    health = cat.health.check_group("g")
    assert not health.stable and "be2 is down" in health.reason

    # within the delay nothing moves: a blip must not re-clone a backend
    summary = lake.run()
    assert not [j for j in summary["jobs"]]
    assert be2 in {be for row in cat.groups.get("g").bucket_map for be in row}

    lake.clock.advance(minutes=31)
    summary = lake.run()
    (job,) = summary["jobs"]
    assert job.kind == "relocate" and job.state == "done" and job.cloned > 0
    g = cat.groups.get("g")
    assert be2 not in {be for row in g.bucket_map for be in row}
    assert all(len(set(row)) == 2 for row in g.bucket_map)
    assert_whole(cat)
    assert fingerprint(cat) == sums
    assert {t: rows(cat, t) for t in before} == before
    kinds = [e.kind for e in cat.events(limit=200)]
    for k in ("balance.plan", "balance.start", "balance.clone", "group.switch_map", "balance.finish"):
        assert k in kinds

    # be2's old replicas wait until be2 is reachable, then go
    assert any(str(lake.root / "backends" / "be2") in d for d in replica_dirs(lake.root))
    cat.backends.set_state("be2", "alive")
    summary = lake.run()
    # its 12 stale copies go; then, empty again, it receives its share like a new backend
    assert summary["dropped"] >= 12 and [j.kind for j in summary["jobs"]] == ["balance"]
    assert {d for d in replica_dirs(lake.root) if "/be2/" in d} == {
        fs.local_path(r.path) for t in before for p in cat.reads.replicas(t)[1] for b in p.buckets for r in b
        if r.backend_id == be2 and r.rows}
    assert_whole(cat)


def test_a_relocation_killed_between_finish_and_close_leaves_a_stable_group(lake):
    """finish records the group stable; close (the drop marks) comes after. Killed in between, the
    job waits at step finished: the group is stable and no relocation is due; the next run closes it."""
    load(lake)
    cat = lake.catalog
    cat.backends.set_state("be2", "down")
    lake.clock.advance(hours=1)

    with pytest.raises(Killed):
        lake.run(on_step=kill_at("finished"))
    (job,) = [j for j in cat.jobs.list() if j.kind == "relocate"]
    assert (job.state, job.step) == ("running", "finished")
    assert cat.health.check_group("g").stable
    outlook = cat.groups.outlook("g")
    assert not outlook.relocation_due and not outlook.joins_shuffle
    summary = lake.run()
    assert [(j.kind, j.state) for j in summary["jobs"]] == [("relocate", "done")]  # resumed and closed, not planned again
    assert cat.jobs.get(job.id).progress["dropping"] > 0  # the lost backend's replicas are marked
    assert_whole(cat)


def test_decommissioned_backend_is_drained_then_removable(lake):
    before = load(lake)
    sums = fingerprint(lake.catalog)
    cat = lake.catalog
    lake.add_backend("be4")
    cat.backends.decommission("be1")
    assert "be1 is decommissioning" in cat.health.check_group("g").reason
    summary = lake.run()
    (job,) = summary["jobs"]
    assert job.kind == "relocate" and job.state == "done"
    assert summary["decommissioned"] == ["be1"]
    assert cat.backends.get("be1").state == "decommissioned"
    assert not any("/be1/" in d + "/" for d in replica_dirs(lake.root))
    assert_whole(cat)
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before
    cat.backends.remove("be1")


def test_new_backends_receive_their_share(lake):
    before = load(lake)
    cat = lake.catalog
    lake.add_backend("be4")
    lake.add_backend("be5")
    summary = lake.run(strategy="count")
    (job,) = summary["jobs"]
    assert job.kind == "balance" and job.moves == 2  # 3,3,2 -> 2,2,2,1,1: the fewest moves
    g = cat.groups.get("g")
    slots = {be: sum(row.count(be) for row in g.bucket_map) for be in lake.names.values()}
    assert sorted(slots.values()) == [1, 1, 2, 2, 2]
    assert slots[lake.names["be4"]] == slots[lake.names["be5"]] == 1
    assert_whole(cat)
    assert {t: rows(cat, t) for t in before} == before
    assert lake.run(strategy="count")["jobs"] == []  # a balanced group is left alone


def test_size_strategy_balances_bytes_against_capacity(lake):
    cat = lake.catalog
    lake.create("events", buckets=8, replicas=1)
    keys = [k for k in range(40_000) if spark_bucket(k, 8) in (0, 1)] + [k for k in range(400) if spark_bucket(k, 8) > 1]
    lake.write("events", "2026-11-01", keys)  # buckets 0 and 1 are big, the rest small
    lake.add_backend("be4", capacity_bytes=10 << 30)

    def bytes_per_backend():
        out = {be: 0 for be in lake.names.values()}
        _, parts = cat.reads.replicas("events")
        for b in parts[0].buckets:
            for r in b:
                out[r.backend_id] += r.bytes
        return out

    spread_before = max(bytes_per_backend().values()) - min(bytes_per_backend().values())
    summary = lake.run(strategy="size")
    (job,) = summary["jobs"]
    assert job.kind == "balance"
    after = bytes_per_backend()
    assert max(after.values()) - min(after.values()) < spread_before
    assert after[lake.names["be4"]] > 0
    assert_whole(cat)


def test_backend_back_before_its_relocation_copied_much_keeps_its_buckets(lake):
    load(lake)
    cat = lake.catalog
    lake.add_backend("be4")
    be2 = lake.names["be2"]
    old_map = cat.groups.get("g").bucket_map
    cat.backends.set_state("be2", "down")
    lake.clock.advance(hours=1)

    with pytest.raises(Killed):
        lake.run(on_step=kill_at("unstable"))  # the relocation is planned and started, nothing copied yet
    cat.backends.set_state("be2", "alive")
    lake.write("orders", "2026-11-03", range(50))  # be2 is back in time to take this write itself
    cat.set_flag("disable_colocate_balance", True)  # only the relocation here, not be4's share
    summary = lake.run()
    (job,) = summary["jobs"]
    assert job.state == "done" and job.cloned == 0 and job.moves == 0
    assert any("came back" in n for n in cat.jobs.get(job.job_id).progress["notes"])
    assert cat.groups.get("g").bucket_map == old_map
    assert be2 in {be for row in cat.groups.get("g").bucket_map for be in row}
    assert_whole(cat)


def test_backend_back_after_most_was_copied_does_not_get_its_buckets_back(lake):
    load(lake)
    cat = lake.catalog
    lake.add_backend("be4")
    cat.backends.set_state("be2", "down")
    lake.clock.advance(hours=1)

    with pytest.raises(Killed):
        lake.run(on_step=kill_at("cloned"))
    cat.backends.set_state("be2", "alive")
    summary = lake.run()
    relocation, *rest = summary["jobs"]
    assert relocation.state == "done" and relocation.kind == "relocate"
    assert any("is back but 100%" in n for n in relocation.notes)
    assert lake.names["be2"] not in {be for row in cat.jobs.get(relocation.job_id).plan["new_map"] for be in row}
    assert [j.kind for j in rest] == ["balance"]  # be2, now empty, then gets a share like a new backend
    assert_whole(cat)
    assert summary["dropped"] > 0  # be2's old copies go, it is alive so at once


def test_corrupted_replica_is_found_by_verify_and_repaired(lake):
    before = load(lake)
    sums = fingerprint(lake.catalog)
    cat = lake.catalog
    _, parts = cat.reads.replicas("orders", ["2026-11-01"])
    victim = parts[0].buckets[1][0]
    (name, _), = replica_dir.replica_files(victim.path)
    path = fs.local_path(fs.join(victim.path, name))
    with open(path, "r+b") as f:  # flip bytes in the middle of the file, same size
        f.seek(100)
        data = f.read(8)
        f.seek(100)
        f.write(bytes(b ^ 0xFF for b in data))
    # without a verify pass nothing notices
    assert lake.run()["jobs"] == []
    summary = lake.run(verify=True)
    assert summary["verified_bad"] == [victim.path]
    (job,) = summary["jobs"]
    assert job.kind == "repair" and job.state == "done" and job.cloned == 1
    assert_whole(cat)
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before
    assert "replica.bad" in [e.kind for e in cat.events(limit=100)]
    assert cat.tx(drift) == []  # the bad row re-registered: summaries equal a recount


def test_corrupt_source_found_while_cloning_is_marked_bad_and_another_source_used(lake):
    lake.create("orders", replicas=3)
    lake.write("orders", "2026-11-01", range(300))
    sums = fingerprint(lake.catalog)
    cat = lake.catalog
    lake.add_backend("be4")
    cat.backends.decommission("be3")
    # corrupt every replica on be1: a clone that reads one finds its bytes differ from the catalog
    for d in replica_dirs(lake.root):
        if "/be1/" in d:
            for f in Path(d).glob("*.parquet"):
                f.write_bytes(f.read_bytes()[:-20] + b"x" * 20)
    summary = lake.run()
    assert any(j.state == "done" for j in summary["jobs"])
    assert cat.tx(drift) == []  # the sources a clone found corrupt were marked bad by the registration
    summary = lake.run()  # be1's bad replicas are repaired in place
    bad = [e for e in cat.events(limit=300) if e.kind == "replica.bad"]
    assert bad and all("/be1/" in e.subject for e in bad)
    assert_whole(cat)
    assert fingerprint(cat) == sums
    assert cat.tx(drift) == []  # sources turned bad while cloning, then repaired in place


def test_write_during_a_balance_ends_up_fully_replicated(lake):
    load(lake, tables=("orders",))
    cat = lake.catalog
    lake.add_backend("be4")  # the balance moves buckets onto it while writes keep landing
    old_map = cat.groups.get("g").bucket_map
    pending = {}

    def write_meanwhile(step, job_id):
        if step == "cloned" and "early" not in pending:
            # a whole write lands on the old map after the clones, before the switch
            pending["early"] = lake.write("orders", "2026-11-03", range(1000, 1200))
            # and one begins on the old map now and commits after the switch
            pending["ticket"] = prepare_write(cat, "orders", "2026-11-04", Source(format="parquet", path="x"),
                                              work_dir=lake.work)
            # and one that only commits after the job has finished
            pending["after"] = prepare_write(cat, "orders", "2026-11-05", Source(format="parquet", path="x"),
                                             work_dir=lake.work)
        if step == "switched" and "late" not in pending:
            pending["late"] = lake.write("orders", "2026-11-04", range(2000, 2100), ticket_and_plan=pending["ticket"])

    summary = lake.run(on_step=write_meanwhile)
    (job,) = summary["jobs"]
    assert job.state == "done" and "late" in pending
    assert cat.groups.get("g").bucket_map != old_map
    # both writes went to the old map, and were cloned onto the new one
    assert {r.backend_id for b in cat.reads.replicas("orders", ["2026-11-03"])[1][0].buckets for r in b} >= {lake.names["be4"]}
    assert_whole(cat)
    got = rows(cat, "orders")
    assert len(got["2026-11-03"]) == 200 and len(got["2026-11-04"]) == 100
    # a write planned on the old map that commits after the job ended: the next check sees it,
    # joins fall back meanwhile, and the next run repairs it
    lake.write("orders", "2026-11-05", range(3000, 3050), ticket_and_plan=pending["after"])
    health = cat.health.check_group("g")
    assert not health.stable and any(r.partition == "2026-11-05" for r in health.reasons)
    (job,) = lake.run()["jobs"]
    assert job.kind == "repair" and job.state == "done"
    assert_whole(cat)


def test_flags_stop_relocation_and_balance(lake):
    load(lake, tables=("orders",))
    cat = lake.catalog
    lake.add_backend("be4")
    cat.backends.set_state("be1", "down")
    lake.clock.advance(hours=1)
    cat.set_flag("disable_colocate_relocate", True)
    cat.set_flag("disable_colocate_balance", True)
    summary = lake.run()
    assert summary["jobs"] == []
    notes = [n for p in summary["plans"] for n in p.notes]
    assert any("disable_colocate_relocate" in n for n in notes)
    # a job planned before the flag was set is cancelled before it switches anything
    cat.set_flag("disable_colocate_relocate", False)

    with pytest.raises(Killed):
        lake.run(on_step=kill_at("planned"))
    old_map = cat.groups.get("g").bucket_map
    cat.set_flag("disable_colocate_relocate", True)
    summary = lake.run()
    assert [j.state for j in summary["jobs"]] == ["cancelled"]
    assert cat.groups.get("g").bucket_map == old_map
    cat.set_flag("disable_colocate_relocate", False)
    cat.set_flag("disable_colocate_balance", False)
    lake.run()
    assert_whole(cat)


def test_dry_run_plans_without_changing_anything(lake):
    load(lake, tables=("orders",))
    cat = lake.catalog
    lake.add_backend("be4")
    events = len(cat.events(limit=1000))
    plans = plan(cat, BalanceOptions(strategy="count"))
    (p,) = plans
    assert p.kind == "balance" and p.moves and all(mv.dst == lake.names["be4"] for mv in p.moves)
    lines = describe_plans(plans, {b.id: b.name for b in cat.backends.list()})
    assert "-> be4" in "\n".join(lines)
    assert len(cat.events(limit=1000)) == events  # nothing written: no job, no event
    assert {j.kind for j in cat.jobs.list()} == {"write"}


@pytest.mark.postgres
@pytest.mark.parametrize("catalog_url", ["postgres"], indirect=True)
def test_relocation_and_kill_on_postgres(lake_on):
    """The whole clone-and-drop flow on a PostgreSQL catalog (SERIALIZABLE transactions)."""
    lake = lake_on
    before = load(lake)
    sums = fingerprint(lake.catalog)
    cat = lake.catalog
    lake.add_backend("be4")
    cat.backends.set_state("be3", "down")
    lake.clock.advance(hours=1)

    with pytest.raises(Killed):
        lake.run(on_step=kill_at("switched"))
    summary = lake.run()
    assert [j.state for j in summary["jobs"]] == ["done"] and summary["groups"][0]["stable"]
    assert_whole(cat)
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before
