"""balance / balance_all: even counts or bytes, keep the placement rules, move as little as possible."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from placement_cases import (
    assert_valid,
    ceil_lower_bound,
    clusters,
    exact_min_moves,
    host_count,
    one_per_host,
    random_map,
    replay,
    slot_counts,
)

from airflow_colocate.core.errors import InvalidArgument, PlacementError
from airflow_colocate.placement import (
    DISTANCES,
    STRATEGIES,
    BackendSlot,
    BalanceStrategy,
    Bucket,
    Move,
    balance,
    balance_all,
    initial_map,
)


def no_allowed_move_narrows_a_gap(bucket_map, backends) -> bool:
    """Local optimality under the host rule: for every pair of backends whose slot counts differ
    by two or more, no bucket of the fuller one may legally go to the emptier one."""
    by_id = {b.id: b for b in backends}
    counts = slot_counts(bucket_map, backends)
    for src, n_src in counts.items():
        for dst, n_dst in counts.items():
            if n_src - n_dst < 2:
                continue
            for row in bucket_map:
                if src in row and dst not in row:
                    others = {by_id[be].host for be in row if be != src}
                    if by_id[dst].host not in others:
                        return False
    return True


# ------------------------------------------------------------------ count, explicit examples


def test_everything_on_one_backend_spreads_with_the_minimum_moves():
    new_map, moves = balance([[1]] * 6, one_per_host(3))
    assert Counter(be for row in new_map for be in row) == {1: 2, 2: 2, 3: 2}
    assert len(moves) == 4
    assert replay([[1]] * 6, moves) == new_map


def test_equal_moves_take_the_fewest_bytes():
    new_map, moves = balance([[1], [1], [1]], one_per_host(2), bucket_bytes={0: 100, 1: 5, 2: 50})
    assert moves == [Move(bucket_seq=1, src=1, dst=2, bytes=5)]
    assert new_map == [[1], [2], [1]]


def test_ties_prefer_the_destination_with_less_load_from_other_groups():
    _, moves = balance([[1], [1]], one_per_host(4), load={2: 5, 3: 1, 4: 3})
    assert [(m.src, m.dst) for m in moves] == [(1, 3)]


def test_ties_prefer_the_source_with_more_load_from_other_groups():
    _, moves = balance([[1], [2], [1], [2]], one_per_host(3), load={1: 0, 2: 9})
    assert [(m.src, m.dst) for m in moves] == [(2, 3)]


def test_a_move_keeps_the_index_so_the_primary_order_is_stable():
    new_map, moves = balance([[1, 2], [1, 3], [1, 2], [1, 3]], one_per_host(4))
    for m in moves:
        assert new_map[m.bucket_seq].index(m.dst) == [[1, 2], [1, 3], [1, 2], [1, 3]][m.bucket_seq].index(m.src)


def test_a_new_backend_receives_its_share():
    backends = one_per_host(4)
    start = initial_map(backends, 16, 3)  # 48 slots on 4 backends
    new_map, moves = balance(start, backends + [BackendSlot(5, "h5")])
    counts = slot_counts(new_map, backends + [BackendSlot(5, "h5")])
    assert counts[5] in (9, 10)  # 3 * 16 / 5 = 9.6
    assert max(counts.values()) - min(counts.values()) <= 1
    assert len(moves) == exact_min_moves(slot_counts(start, backends + [BackendSlot(5, "h5")])) == 9


def test_a_balanced_map_makes_no_moves():
    backends = one_per_host(5)
    start = initial_map(backends, 32, 2)
    assert balance(start, backends) == (start, [])


def test_the_host_rule_limits_what_balance_can_do():
    # Host "a" has two backends; every bucket already has one replica on "a" and one on "b", so
    # the two backends of "a" can share their slots but can never take "b"'s.
    backends = [BackendSlot(1, "a"), BackendSlot(2, "a"), BackendSlot(3, "b")]
    start = [[1, 3]] * 6
    new_map, moves = balance(start, backends)
    assert_valid(new_map, backends, 6, 2)
    assert Counter(be for row in new_map for be in row) == {3: 6, 1: 3, 2: 3}
    assert len(moves) == 3


def test_max_moves_gives_a_prefix_of_the_full_plan():
    backends = one_per_host(6)
    start = random_map(random.Random(1), backends, 40, 2, skew=2.0)
    _, full = balance(start, backends)
    assert len(full) > 3
    partial_map, partial = balance(start, backends, max_moves=3)
    assert partial == full[:3]
    assert replay(start, partial) == partial_map


def test_threshold_skips_moves_that_gain_little():
    backends = one_per_host(4)
    start = [[1], [1], [1], [2], [2], [3], [3], [4]]  # counts 3,2,2,1: gap 2, average 2
    assert len(balance(start, backends)[1]) == 1
    assert balance(start, backends, threshold=1.5)[1] == []  # a gap of 2 < 1.5 * 2


# ------------------------------------------------------------------ errors


def test_a_map_naming_a_down_backend_must_be_relocated_first():
    backends = [BackendSlot(1, "h1"), BackendSlot(2, "h2", available=False), BackendSlot(3, "h3")]
    with pytest.raises(PlacementError, match=r"bucket 1 of the map names be2@h2, which is down or decommissioning: run relocate\(\) first"):
        balance([[1], [2]], backends)
    with pytest.raises(PlacementError, match=r"bucket 0 of group 7 names backend 9, which is not among"):
        balance_all({7: [[9]]}, backends)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "random"}, "strategy must be 'count' or 'size'"),
        ({"strategy": "size"}, "strategy 'size' needs bucket_bytes"),
        ({"threshold": -0.1}, "threshold must be a fraction >= 0"),
        ({"max_moves": -1}, "max_moves must be an int >= 0"),
        ({"bucket_bytes": {0: -5}}, r"bucket_bytes\[0\] of group 0 must be an int >= 0"),
    ],
)
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(PlacementError, match=message):
        balance([[1]], one_per_host(2), **kwargs)


def test_an_unknown_strategy_is_an_invalid_argument_naming_the_registered_ones():
    with pytest.raises(InvalidArgument, match=r"^strategy must be 'count' or 'size', got 'slots'$") as caught:
        balance_all({0: [[1]]}, one_per_host(2), strategy="slots")
    assert isinstance(caught.value, PlacementError)  # callers that catch every placement refusal still do
    assert "\n" not in str(caught.value)
    assert set(STRATEGIES) == {"count", "size"}


def test_a_strategy_that_returns_a_bad_cost_or_capacity_is_refused():
    negative = dataclasses.replace(STRATEGIES["count"], name="negative", cost=lambda bucket: -1)
    with pytest.raises(PlacementError, match=r"strategy 'negative' gave bucket 0 of group 0 the cost -1: a cost must be a"):
        balance([[1]], one_per_host(2), strategy=negative)
    words = dataclasses.replace(STRATEGIES["count"], name="words", cost=lambda bucket: "heavy")
    with pytest.raises(PlacementError, match=r"strategy 'words' gave bucket 0 of group 3 the cost 'heavy'"):
        balance_all({3: [[1]]}, one_per_host(2), strategy=words)
    empty = dataclasses.replace(STRATEGIES["size"], name="empty", capacity=lambda backend: 0)
    with pytest.raises(PlacementError, match=r"strategy 'empty' gave be1@h1 the capacity 0: a capacity must be a"):
        balance([[1]], one_per_host(2), strategy=empty, bucket_bytes={0: 1})


def test_a_malformed_strategy_is_refused_when_it_is_defined():
    with pytest.raises(InvalidArgument, match=r"strategy 'free': cost must be a number >= 0 or a function of a Bucket"):
        dataclasses.replace(STRATEGIES["count"], name="free", cost=-1)
    with pytest.raises(InvalidArgument, match=r"strategy 'odd': objective 'squares' lacks rank, floor, opens, peak, gain"):
        dataclasses.replace(STRATEGIES["count"], name="odd", objective="squares")


def test_no_available_backend():
    with pytest.raises(PlacementError, match="no backend is available"):
        balance([], [BackendSlot(1, "h1", available=False)])


# ------------------------------------------------------------------ count, properties


@settings(max_examples=250, deadline=None)
@given(st.integers(2, 14), st.integers(1, 3), st.integers(1, 80), st.floats(1.0, 3.0), st.integers(0, 2**32 - 1))
def test_count_one_backend_per_host_is_even_and_minimal(n, replicas, buckets, skew, seed):
    rng = random.Random(seed)
    assume(replicas <= n)
    backends = one_per_host(n)
    start = random_map(rng, backends, buckets, replicas, skew)
    load = {b.id: rng.randrange(10) for b in backends}
    new_map, moves = balance(start, backends, load=load)

    assert_valid(new_map, backends, buckets, replicas)
    assert replay(start, moves) == new_map
    counts = slot_counts(new_map, backends)
    assert max(counts.values()) - min(counts.values()) <= 1
    before = slot_counts(start, backends)
    assert ceil_lower_bound(before) <= len(moves) == exact_min_moves(before)
    assert balance(start, backends, load=load) == (new_map, moves)


@settings(max_examples=250, deadline=None)
@given(clusters(), st.integers(1, 60), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_count_random_clusters_keep_the_rules_and_reach_a_local_optimum(backends, buckets, replicas, seed):
    rng = random.Random(seed)
    assume(replicas <= host_count(backends))
    start = random_map(rng, backends, buckets, replicas, skew=rng.uniform(1, 3))
    new_map, moves = balance(start, backends)
    assert_valid(new_map, backends, buckets, replicas)
    assert replay(start, moves) == new_map
    assert no_allowed_move_narrows_a_gap(new_map, backends)
    # Every move narrows a gap of two or more, so it lowers the sum of squared slot counts by at
    # least 2: the plan can never wander. (The exact minimum is proven for one backend per host.)
    before, after = slot_counts(start, backends), slot_counts(new_map, backends)
    squares = sum(n * n for n in before.values()) - sum(n * n for n in after.values())
    assert sum(max(0, before[b] - after[b]) for b in before) <= len(moves) <= squares // 2


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 12), st.integers(1, 3), st.integers(1, 64), st.integers(1, 4))
def test_new_backends_receive_replicas_times_buckets_over_backends(n, replicas, buckets, added):
    assume(replicas <= n)
    old = one_per_host(n)
    everyone = old + one_per_host(added, start=n + 1)
    new_map, moves = balance(initial_map(old, buckets, replicas), everyone)
    share = replicas * buckets / len(everyone)
    counts = slot_counts(new_map, everyone)
    for b in everyone[n:]:
        assert share - 1 < counts[b.id] < share + 1
    assert len(moves) == exact_min_moves(slot_counts(initial_map(old, buckets, replicas), everyone))


# ------------------------------------------------------------------ size


def share_errors(bucket_map, backends, bucket_bytes, load=None):
    """Relative distance of each backend's bytes from total * cap / sum(cap)."""
    caps = {b.id: b.capacity_bytes for b in backends if b.available}
    known = sorted(c for c in caps.values() if c)
    median = (known[(len(known) - 1) // 2] + known[len(known) // 2]) / 2 if known else 1
    caps = {be: c or median for be, c in caps.items()}
    used = Counter({be: (load or {}).get(be, 0) for be in caps})
    for seq, row in enumerate(bucket_map):
        for be in row:
            used[be] += bucket_bytes[seq]
    total = sum(used.values())
    return {be: abs(used[be] - total * caps[be] / sum(caps.values())) / (total * caps[be] / sum(caps.values())) for be in caps}


def test_size_balances_bytes_against_capacity():
    backends = [BackendSlot(1, "h1", 1000), BackendSlot(2, "h2", 3000)]
    bucket_bytes = {seq: 10 for seq in range(40)}
    new_map, moves = balance([[1]] * 40, backends, strategy="size", bucket_bytes=bucket_bytes)
    assert Counter(row[0] for row in new_map) == {1: 10, 2: 30}
    assert sum(m.bytes for m in moves) == 300
    assert all(m.bytes == 10 for m in moves)


def test_size_unknown_capacity_counts_as_the_median():
    backends = [BackendSlot(1, "h1", 1000), BackendSlot(2, "h2", 3000), BackendSlot(3, "h3")]  # h3 = 2000
    new_map, _ = balance([[1]] * 60, backends, strategy="size", bucket_bytes=dict.fromkeys(range(60), 1))
    assert Counter(row[0] for row in new_map) == {1: 10, 2: 30, 3: 20}


def test_size_moves_the_biggest_bucket_that_fits_the_deficit():
    backends = one_per_host(2)
    # backend 1 holds 100 + 60 + 40 = 200, backend 2 holds 0: target 100 each.
    new_map, moves = balance([[1], [1], [1]], backends, strategy="size", bucket_bytes={0: 100, 1: 60, 2: 40})
    assert moves == [Move(0, 1, 2, 100)]


def test_size_counts_load_from_other_groups():
    backends = one_per_host(2)
    new_map, moves = balance([[1], [2], [1], [2]], backends, strategy="size", bucket_bytes=dict.fromkeys(range(4), 10), load={1: 20})
    assert Counter(row[0] for row in new_map) == {1: 1, 2: 3}


def test_size_threshold_blocks_small_gains():
    backends = one_per_host(2)
    start = [[1]] * 11 + [[2]] * 9
    assert len(balance(start, backends, strategy="size", bucket_bytes=dict.fromkeys(range(20), 1))[1]) == 1
    assert balance(start, backends, strategy="size", bucket_bytes=dict.fromkeys(range(20), 1), threshold=0.5)[1] == []


def smallest_target(backends, sizes, replicas):
    """The fair share of the smallest backend: 10% of it must be more than one bucket, or the
    10% promise cannot hold however the buckets are placed."""
    caps = [b.capacity_bytes for b in backends]
    known = sorted(c for c in caps if c) or [1]
    median = (known[(len(known) - 1) // 2] + known[len(known) // 2]) / 2
    filled = [c or median for c in caps]
    total = replicas * sum(sum(s.values()) for s in sizes.values())
    return total * min(filled) / sum(filled)


@st.composite
def heterogeneous(draw):
    """One backend per host, capacities 1x..4x, with no backend's share above 80% of one copy of
    the data: a backend can hold one replica of each bucket at most, so a bigger share could
    never be reached."""
    replicas = draw(st.integers(1, 3))
    n = draw(st.integers(max(2, replicas + 1), 9))
    caps = [draw(st.one_of(st.none(), st.integers(1, 4))) for _ in range(n)]
    known = sorted(c for c in caps if c) or [1]
    median = (known[(len(known) - 1) // 2] + known[len(known) // 2]) / 2
    filled = [c or median for c in caps]
    assume(max(filled) / sum(filled) * replicas <= 0.8)
    return [BackendSlot(i + 1, f"h{i + 1}", c and c * 10**6) for i, c in enumerate(caps)], replicas


@settings(max_examples=150, deadline=None)
@given(heterogeneous(), st.integers(120, 300), st.integers(0, 2**32 - 1))
def test_size_ends_within_ten_percent_of_the_fair_share(cluster, buckets, seed):
    rng = random.Random(seed)
    backends, replicas = cluster
    bucket_bytes = {seq: rng.randint(1, 40) for seq in range(buckets)}
    start = random_map(rng, backends, buckets, replicas, skew=rng.uniform(1, 2))
    assume(max(bucket_bytes.values()) <= 0.05 * smallest_target(backends, {0: bucket_bytes}, replicas))
    new_map, moves = balance(start, backends, strategy="size", bucket_bytes=bucket_bytes)
    assert_valid(new_map, backends, buckets, replicas)
    assert replay(start, moves) == new_map
    assert all(m.bytes == bucket_bytes[m.bucket_seq] for m in moves)
    assert max(share_errors(new_map, backends, bucket_bytes).values()) <= 0.10
    assert balance(start, backends, strategy="size", bucket_bytes=bucket_bytes) == (new_map, moves)


@settings(max_examples=100, deadline=None)
@given(clusters(capacities=True), st.integers(1, 60), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_size_random_clusters_keep_the_rules_and_never_worsen(backends, buckets, replicas, seed):
    rng = random.Random(seed)
    assume(replicas <= host_count(backends))
    bucket_bytes = {seq: rng.randint(0, 1000) for seq in range(buckets)}
    start = random_map(rng, backends, buckets, replicas, skew=rng.uniform(1, 3))
    new_map, moves = balance(start, backends, strategy="size", bucket_bytes=bucket_bytes)
    assert_valid(new_map, backends, buckets, replicas)
    assert replay(start, moves) == new_map

    def deviation(m):
        errors = share_errors(m, backends, bucket_bytes) if sum(bucket_bytes.values()) else {}
        return sum(errors.values())

    assert deviation(new_map) <= deviation(start) + 1e-9


# ------------------------------------------------------------------ balance_all


def totals_of(maps, backends, load=None):
    """Slots per available backend over all groups, plus ``load`` (zeros kept, unlike Counter +)."""
    counts = Counter({b.id: (load or {}).get(b.id, 0) for b in backends if b.available})
    for m in maps.values():
        counts.update(be for row in m for be in row)
    return counts


def test_balance_all_spreads_groups_created_before_new_backends_joined():
    old = one_per_host(16)
    load: Counter[int] = Counter()
    groups = {}
    for g in range(12):
        groups[g] = initial_map(old, 16, 3, load)
        load.update(be for row in groups[g] for be in row)
    everyone = old + one_per_host(4, start=17)
    new_maps, moves = balance_all(groups, everyone)

    before = totals_of(groups, everyone)
    after = totals_of(new_maps, everyone)
    assert max(after.values()) - min(after.values()) <= 1
    for g, m in new_maps.items():
        assert_valid(m, everyone, 16, 3)
        assert replay(groups[g], moves[g]) == m
        counts = slot_counts(m, everyone)
        assert max(counts.values()) - min(counts.values()) <= 1
    made = sum(len(v) for v in moves.values())
    assert made == exact_min_moves(before)
    assert made <= 1.05 * ceil_lower_bound(before)


@settings(max_examples=120, deadline=None)
@given(st.integers(2, 12), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_balance_all_count_groups_and_totals_within_one(n, group_num, seed):
    rng = random.Random(seed)
    backends = one_per_host(n)
    groups = {}
    for g in range(group_num):
        replicas = rng.randint(1, min(3, n))
        groups[g * 10] = random_map(rng, backends, rng.randint(1, 30), replicas, skew=rng.uniform(1, 3))
    load = {b.id: rng.randrange(4) if rng.random() < 0.5 else 0 for b in backends}
    new_maps, moves = balance_all(groups, backends, load=load)

    per_group_min = 0
    for g, m in new_maps.items():
        assert_valid(m, backends, len(groups[g]), len(groups[g][0]))
        assert replay(groups[g], moves[g]) == m
        counts = slot_counts(m, backends)
        assert max(counts.values()) - min(counts.values()) <= 1
        per_group_min += exact_min_moves(slot_counts(groups[g], backends))
    after = totals_of(new_maps, backends, load)
    if not any(load.values()):
        assert max(after.values()) - min(after.values()) <= 1
    else:
        # Load from outside may be too big to even out by moving these groups; then no group can
        # still move a slot from a fuller backend to an emptier one without widening its spread.
        for src in after:
            for dst in after:
                if after[src] - after[dst] >= 2:
                    for m in new_maps.values():
                        counts = slot_counts(m, backends)
                        assert counts[src] <= counts[dst]

    before = totals_of(groups, backends, load)
    made = sum(len(v) for v in moves.values())
    # Pass 1 makes exactly the per-group minimum; each of those moves changes the totals' own
    # minimum by at most one, and pass 2 makes exactly that minimum.
    # (With outside load the totals' minimum may be out of reach, so it is only an upper bound.)
    floor = max(per_group_min, exact_min_moves(before)) if not any(load.values()) else per_group_min
    assert floor <= made <= 2 * per_group_min + exact_min_moves(before)
    assert balance_all(groups, backends, load=load) == (new_maps, moves)


@settings(max_examples=100, deadline=None)
@given(clusters(), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_balance_all_count_random_clusters_keep_the_rules(backends, group_num, seed):
    rng = random.Random(seed)
    hosts = host_count(backends)
    assume(hosts >= 1)
    groups = {}
    for g in range(group_num):
        replicas = rng.randint(1, min(3, hosts))
        groups[g] = random_map(rng, backends, rng.randint(1, 30), replicas, skew=rng.uniform(1, 3))
    new_maps, moves = balance_all(groups, backends, max_moves=rng.choice([None, 5, 50]))
    for g, m in new_maps.items():
        assert_valid(m, backends, len(groups[g]), len(groups[g][0]))
        assert replay(groups[g], moves[g]) == m


@settings(max_examples=80, deadline=None)
@given(heterogeneous(), st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_balance_all_size_within_ten_percent(cluster, group_num, seed):
    rng = random.Random(seed)
    backends, replicas = cluster
    groups, sizes = {}, {}
    for g in range(group_num):
        buckets = rng.randint(40, 120)
        groups[g] = random_map(rng, backends, buckets, replicas, skew=rng.uniform(1, 2))
        sizes[g] = {seq: rng.randint(1, 30) for seq in range(buckets)}
    assume(max(max(s.values()) for s in sizes.values()) <= 0.05 * smallest_target(backends, sizes, replicas))
    new_maps, moves = balance_all(groups, backends, strategy="size", bucket_bytes=sizes)
    flat_map, flat_bytes = [], {}
    for g, m in new_maps.items():
        assert_valid(m, backends, len(groups[g]), replicas)
        assert replay(groups[g], moves[g]) == m
        for seq, row in enumerate(m):
            flat_bytes[len(flat_map)] = sizes[g][seq]
            flat_map.append(row)
    assert max(share_errors(flat_map, backends, flat_bytes).values()) <= 0.10


def test_balance_all_max_moves_is_a_global_cap():
    backends = one_per_host(6)
    rng = random.Random(3)
    groups = {g: random_map(rng, backends, 20, 2, skew=3.0) for g in range(3)}
    _, moves = balance_all(groups, backends, max_moves=4)
    assert sum(len(v) for v in moves.values()) == 4


def test_balance_all_of_nothing():
    assert balance_all({}, one_per_host(3)) == ({}, {})


# ------------------------------------------------------------------ custom strategies


def test_a_custom_strategy_whose_allowed_forbids_a_backend_plugs_into_the_same_loop():
    old = one_per_host(4)
    everyone = old + [BackendSlot(5, "h5"), BackendSlot(6, "h6")]
    start = initial_map(old, 30, 2)  # 60 slots on 4 backends, none on 5 or 6
    asked = []

    def not_on_5(bucket, backend):
        asked.append((bucket, backend.id))
        return backend.id != 5

    not_5 = dataclasses.replace(STRATEGIES["count"], name="count-not-on-5", allowed=not_on_5)
    new_map, moves = balance(start, everyone, strategy=not_5)

    assert_valid(new_map, everyone, 30, 2)
    assert replay(start, moves) == new_map
    counts = slot_counts(new_map, everyone)
    assert counts[5] == 0 and all(m.dst != 5 for m in moves)
    others = [n for be, n in counts.items() if be != 5]
    assert max(others) - min(others) <= 1  # the five allowed backends share the 60 slots: 12 each
    assert len(moves) == exact_min_moves(Counter({be: n for be, n in slot_counts(start, everyone).items() if be != 5}))
    assert (Bucket(None, moves[0].bucket_seq, 0), moves[0].dst) in asked  # balance() sees no group id
    # The same map under plain "count" does use backend 5: the veto, not the data, kept it empty.
    assert slot_counts(balance(start, everyone)[0], everyone)[5] > 0


def test_a_custom_strategy_can_keep_one_group_off_a_backend_in_balance_all():
    old = one_per_host(3)
    everyone = old + [BackendSlot(4, "h4")]
    groups = {7: initial_map(old, 12, 1), 8: initial_map(old, 12, 1)}
    def keep_7_off_4(bucket, backend):
        return not (bucket.group == 7 and backend.id == 4)

    keep_7_off_4 = dataclasses.replace(STRATEGIES["count"], name="keep-7-off-4", allowed=keep_7_off_4)
    new_maps, moves = balance_all(groups, everyone, strategy=keep_7_off_4)
    for g, m in new_maps.items():
        assert_valid(m, everyone, 12, 1)
        assert replay(groups[g], moves[g]) == m
    assert slot_counts(new_maps[7], everyone)[4] == 0
    assert slot_counts(new_maps[8], everyone)[4] == 3  # group 8 is free to spread: 12 slots over 4 backends


def test_a_custom_strategy_can_weigh_slots_against_capacity():
    # Slots (cost 1), not bytes, but in proportion to capacity: the DISTANCES objective with
    # count's cost. No bucket_bytes needed.
    slots_by_capacity = BalanceStrategy(
        "slots-by-capacity", cost=lambda bucket: 1, capacity=lambda backend: backend.capacity_bytes,
        objective=DISTANCES, per_group=False,
    )
    backends = [BackendSlot(1, "h1", 1000), BackendSlot(2, "h2", 3000)]
    new_map, moves = balance([[1]] * 40, backends, strategy=slots_by_capacity)
    assert Counter(row[0] for row in new_map) == {1: 10, 2: 30}
    assert len(moves) == 30 and all(m.bytes == 0 for m in moves)
