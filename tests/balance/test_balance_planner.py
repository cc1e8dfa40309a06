"""The balance planner (pure): relocation keeps transient backends, flags and running jobs are
honoured, and on random clusters every plan keeps the placement rules."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_colocate.planner.balance import plan_balance
from airflow_colocate.model.views import BackendHealth, ClusterSnapshot, GroupSnapshot

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
DELAY = timedelta(minutes=30)


def be(i, state="alive", host=None, down_for=timedelta(0), cap=None):
    since = NOW - down_for
    unavailable = state in ("decommissioning", "decommissioned") or (state == "down" and down_for >= DELAY)
    return BackendHealth(i, f"be{i}", f"file:///d/be{i}", host or f"h{i}", cap, state, since, None, None, unavailable)


def grp(gid, bucket_map, sizes=None, job=None):
    return GroupSnapshot(gid, f"1.{gid}", f"1_g{gid}", len(bucket_map), len(bucket_map[0]),
                         tuple(tuple(r) for r in bucket_map), tuple(sizes or [10] * len(bucket_map)), job, 0, 0)


def snap(backends, groups, flags=None):
    return ClusterSnapshot(NOW, DELAY, tuple(backends), tuple(groups), {}, dict(flags or {}))


def test_only_unavailable_backends_are_relocated():
    backends = [be(1), be(2, "down", down_for=timedelta(hours=1)), be(3, "down", down_for=timedelta(minutes=5)), be(4), be(5)]
    bucket_map = [[1, 2], [2, 3], [3, 1], [1, 2]]
    (p,) = plan_balance(snap(backends, [grp(1, bucket_map)]), balance_enabled=False)
    assert p.kind == "relocate"
    assert [row[0] for row in p.new_map] == [1, p.new_map[1][0], 3, 1]
    assert all(2 not in row for row in p.new_map)  # down an hour: replaced
    assert p.new_map[1][1] == 3 and p.new_map[2][0] == 3  # down 5 minutes: kept, it may come back
    assert {mv.why for mv in p.moves} == {"relocate"} and all(mv.src == 2 for mv in p.moves)
    assert {mv.dst for mv in p.moves} <= {4, 5}


def test_a_replacement_never_shares_a_host_with_a_transient_backend():
    backends = [be(1, "down", host="hA", down_for=timedelta(minutes=5)), be(2, "down", down_for=timedelta(hours=2)),
                be(3, host="hA"), be(4)]
    (p,) = plan_balance(snap(backends, [grp(1, [[1, 2]])]), balance_enabled=False)
    row = p.new_map[0]
    assert row[0] == 1 and row[1] != 3  # be3 shares be1's host
    assert row in ([1, 4], [1, 2])


def test_decommissioning_is_a_relocation_with_its_own_reason():
    backends = [be(1), be(2, "decommissioning"), be(3), be(4)]
    (p,) = plan_balance(snap(backends, [grp(1, [[1, 2], [2, 3], [3, 1]])]))
    assert all(2 not in row for row in p.new_map)
    assert {mv.why for mv in p.moves if mv.src == 2} == {"decommission"} and p.kind == "relocate"


def test_flags_and_running_jobs():
    backends = [be(1), be(2, "down", down_for=timedelta(hours=1)), be(3), be(4)]
    groups = [grp(1, [[1, 2], [2, 3]]), grp(2, [[1, 3], [3, 1]], job=7)]
    p1, p2 = plan_balance(snap(backends, groups, {"disable_colocate_relocate": True}))
    assert p1.moves == [] and any("disable_colocate_relocate" in n for n in p1.notes)
    assert p2.moves == [] and any("job 7" in n for n in p2.notes)
    backends = [be(1), be(2), be(3), be(4)]
    (p,) = plan_balance(snap(backends, [grp(1, [[1, 2], [2, 3], [3, 1], [1, 2]])], {"disable_colocate_balance": True}))
    assert p.moves == [] and any("disable_colocate_balance" in n for n in p.notes)
    (p,) = plan_balance(snap(backends, [grp(1, [[1, 2], [2, 3], [3, 1], [1, 2]])]))
    assert p.kind == "balance" and {mv.dst for mv in p.moves} == {4}


def test_only_the_groups_asked_for_but_others_count_as_load():
    backends = [be(1), be(2), be(3)]
    full = [[1, 2]] * 4
    plans = plan_balance(snap(backends, [grp(1, full), grp(2, [[3, 1], [3, 2]])]), groups={2})
    assert [p.grp_id for p in plans] == [2]


@st.composite
def cluster_and_groups(draw):
    rng = random.Random(draw(st.integers(0, 2**32)))
    n = draw(st.integers(3, 10))
    hosts = draw(st.integers(2, n))
    backends = []
    for i in range(1, n + 1):
        state = draw(st.sampled_from(["alive"] * 6 + ["down", "decommissioning"]))
        down_for = draw(st.sampled_from([timedelta(minutes=1), timedelta(hours=1)]))
        backends.append(be(i, state, host=f"h{i % hosts}", down_for=down_for, cap=draw(st.sampled_from([None, 1 << 30, 4 << 30]))))
    groups = []
    for gid in range(1, draw(st.integers(1, 4)) + 1):
        replicas = draw(st.integers(1, 2))
        buckets = draw(st.integers(1, 12))
        bucket_map = []
        for _ in range(buckets):
            pool = list(backends)
            rng.shuffle(pool)
            row, used = [], set()
            for b in pool:
                if b.host not in used and len(row) < replicas:
                    row.append(b.id)
                    used.add(b.host)
            bucket_map.append(row)
        if all(len(r) == replicas for r in bucket_map):
            groups.append(grp(gid, bucket_map, sizes=[rng.randint(0, 1000) for _ in range(buckets)]))
    return backends, groups, draw(st.sampled_from(["count", "size"]))


@settings(max_examples=150, deadline=None)
@given(cluster_and_groups())
def test_random_plans_keep_the_rules(case):
    backends, groups, strategy = case
    by_id = {b.id: b for b in backends}
    for p in plan_balance(snap(backends, groups), strategy=strategy):
        g = next(x for x in groups if x.grp_id == p.grp_id)
        assert len(p.new_map) == len(g.bucket_map)
        diffs = 0
        for seq, (old, new) in enumerate(zip(p.old_map, p.new_map)):
            assert len(new) == len(old) and len(set(new)) == len(new)
            assert len({by_id[x].host for x in new}) == len(new), f"bucket {seq}: two replicas on one host"
            for i, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    diffs += 1
                    assert by_id[b].alive, "a replica moves only to an alive backend"
                    assert not by_id[a].transiently_down, "a transiently down backend keeps its buckets"
                else:
                    assert not by_id[a].unavailable or any("cannot relocate" in n or "waits" in n for n in p.notes)
        assert diffs == len(p.moves)
        assert all(mv.why in ("relocate", "decommission", "balance") for mv in p.moves)
