"""relocate: replace lost backends by the least-loaded eligible one, keep everything else."""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from placement_cases import assert_valid, clusters, host_count, one_per_host

from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement import BackendSlot, initial_map, relocate


def down(backends, *ids):
    return [BackendSlot(b.id, b.host, b.capacity_bytes, b.id not in ids) for b in backends]


def test_replacement_is_least_loaded_and_takes_the_same_index():
    backends = down(one_per_host(4), 2)
    # healthy slots: 1 -> 2, 3 -> 2, 4 -> 0
    assert relocate([[1, 2], [3, 1], [2, 3]], backends) == [[1, 4], [3, 1], [4, 3]]


def test_a_lost_primary_is_replaced_in_place():
    backends = down(one_per_host(4), 1)
    assert relocate([[1, 2, 3]], backends) == [[4, 2, 3]]


def test_counts_the_whole_map_before_choosing():
    # Backend 4 is empty in bucket 0's eyes only if we count bucket by bucket; it already holds
    # two slots further down the map, so backend 5 (one slot) must win.
    backends = down(one_per_host(5), 1)
    result = relocate([[1, 2], [4, 3], [4, 2], [5, 3]], backends)
    assert result[0] == [5, 2]


def test_external_load_breaks_ties_then_id():
    backends = down(one_per_host(4), 1)
    assert relocate([[1, 2]], backends, load={3: 9, 4: 1}) == [[4, 2]]
    assert relocate([[1, 2]], backends, load={3: 1, 4: 1}) == [[3, 2]]
    assert relocate([[1, 2]], backends) == [[3, 2]]


def test_unknown_backends_are_replaced_like_down_ones():
    assert relocate([[7, 1]], one_per_host(3)) == [[2, 1]]


def test_a_sibling_on_the_host_of_the_lost_backend_is_eligible():
    backends = [BackendSlot(1, "a", available=False), BackendSlot(2, "a"), BackendSlot(3, "b")]
    assert relocate([[1, 3]], backends) == [[2, 3]]


def test_host_already_holding_the_bucket_is_not_eligible():
    backends = [BackendSlot(1, "a"), BackendSlot(2, "a"), BackendSlot(3, "b", available=False), BackendSlot(4, "c")]
    assert relocate([[1, 3]], backends) == [[1, 4]]


def test_healthy_map_comes_back_unchanged_as_a_copy():
    original = [[1, 2], [2, 3]]
    result = relocate(original, one_per_host(3))
    assert result == original and result is not original and result[0] is not original[0]


def test_no_eligible_backend_names_the_bucket():
    backends = [BackendSlot(1, "h1"), BackendSlot(2, "h2"), BackendSlot(3, "h3", available=False), BackendSlot(4, "h1")]
    with pytest.raises(PlacementError) as err:
        relocate([[1, 2, 3], [2, 3, 1]], backends)
    message = str(err.value)
    assert "bucket 0 cannot replace be3@h3 (it is down or decommissioning)" in message
    assert "(h1, h2)" in message and "lower replication_num" in message


def test_an_unknown_backend_without_replacement_is_named_too():
    with pytest.raises(PlacementError, match="bucket 0 cannot replace backend 9 \\(it is not among the backends given\\)"):
        relocate([[1, 9]], [BackendSlot(1, "h1")])


def test_a_bucket_listing_a_backend_twice_is_refused():
    with pytest.raises(PlacementError, match="bucket 1 of the map lists backend 2 more than once"):
        relocate([[1, 2], [2, 2]], one_per_host(3))


@settings(max_examples=150, deadline=None)
@given(clusters(p_down=0.0), st.integers(1, 40), st.integers(1, 3), st.integers(0, 2**32 - 1), st.data())
def test_invariants_on_random_failures(backends, buckets, replicas, seed, data):
    rng = random.Random(seed)
    assume(replicas <= host_count(backends))
    bucket_map = initial_map(backends, buckets, replicas)
    ids = [b.id for b in backends]
    lost = set(data.draw(st.lists(st.sampled_from(ids), max_size=len(ids) // 2 + 1)))
    forgotten = {i for i in lost if rng.random() < 0.3}  # removed from the list entirely
    after = [b for b in down(backends, *lost) if b.id not in forgotten]
    by_id = {b.id: b for b in after}
    load = {b.id: rng.randrange(5) for b in after}

    def healthy(be):
        return be in by_id and by_id[be].available

    # A bucket can be repaired iff enough hosts are free of its healthy replicas.
    live_hosts = {b.host for b in after if b.available}
    feasible = all(
        len(live_hosts - {by_id[be].host for be in row if healthy(be)}) >= sum(not healthy(be) for be in row)
        for row in bucket_map
    )
    if not feasible:
        with pytest.raises(PlacementError, match=r"bucket \d+ cannot replace"):
            relocate(bucket_map, after, load)
        return

    result = relocate(bucket_map, after, load)
    assert_valid(result, after, buckets, replicas)  # replication_num entries everywhere
    for old_row, new_row in zip(bucket_map, result):
        for old, new in zip(old_row, new_row):
            if healthy(old):
                assert new == old  # healthy entries stay at their index
    assert relocate(bucket_map, after, load) == result


@settings(max_examples=80, deadline=None)
@given(clusters(p_down=0.0), st.integers(1, 40), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_each_replacement_is_the_least_loaded_eligible_backend(backends, buckets, replicas, seed):
    """Replays the choices with a plain O(n) scan: the heap must agree with the definition."""
    rng = random.Random(seed)
    assume(replicas < host_count(backends))
    bucket_map = initial_map(backends, buckets, replicas)
    lost = {b.id for b in backends if rng.random() < 0.25}
    after = down(backends, *lost)
    by_id = {b.id: b for b in after}
    load = {b.id: rng.randrange(3) for b in after}
    try:
        result = relocate(bucket_map, after, load)
    except PlacementError:
        return
    slots = {b.id: 0 for b in after if b.available}
    for row in bucket_map:
        for be in row:
            if be not in lost:
                slots[be] += 1
    for old_row, new_row in zip(bucket_map, result):
        kept = [be for be in old_row if be not in lost]
        for old, new in zip(old_row, new_row):
            if old not in lost:
                continue
            hosts = {by_id[be].host for be in kept}
            eligible = [be for be in slots if be not in kept and by_id[be].host not in hosts]
            assert new == min(eligible, key=lambda be: (slots[be], load[be], be))
            kept.append(new)
            slots[new] += 1


def test_random_skewed_map_repair_is_deterministic():
    rng = random.Random(7)
    backends = one_per_host(9)
    bucket_map = [rng.sample(range(1, 10), 3) for _ in range(50)]
    after = down(backends, 2, 5)
    assert relocate(bucket_map, after) == relocate(bucket_map, after)


def test_the_only_healthy_holder_is_kept_and_the_bucket_keeps_its_length():
    backends = down(one_per_host(4), 2, 3)
    result = relocate([[2, 1, 3]], backends + [BackendSlot(5, "h5")])
    assert result == [[4, 1, 5]]  # 1 stays at index 1; both lost entries replaced, none dropped
    with pytest.raises(PlacementError, match="bucket 0 cannot replace"):
        relocate([[2, 1, 3]], backends)  # only two live hosts for three replicas: refuse, never shrink
