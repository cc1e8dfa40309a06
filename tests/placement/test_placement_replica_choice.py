"""choose_replicas: one backend per bucket seq, a function of the map, spread evenly."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_cases import one_per_host

from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement import choose_replicas, initial_map


def test_all_up_round_robin_map_reads_the_primaries():
    assert choose_replicas([[1, 2], [2, 3], [3, 1], [1, 2]], {1, 2, 3}) == [1, 2, 3, 1]


def test_a_down_backend_is_skipped_and_its_reads_are_spread():
    assert choose_replicas([[1, 2], [2, 3], [3, 1], [1, 2]], {2, 3}) == [2, 3, 3, 2]


def test_ties_go_to_map_order():
    assert choose_replicas([[5, 4], [4, 5]], {4, 5}) == [5, 4]
    assert choose_replicas([[5, 4], [5, 4]], {4, 5}) == [5, 4]


def test_no_available_replica_names_the_bucket():
    with pytest.raises(PlacementError, match=r"bucket 1 has no available replica: its backends \[3, 4\]"):
        choose_replicas([[1, 2], [3, 4]], {1, 2})


def test_empty_map():
    assert choose_replicas([], set()) == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True), min_size=1, max_size=80),
    st.sets(st.integers(1, 12)),
)
def test_choice_is_available_least_chosen_and_deterministic(bucket_map, available):
    if any(not set(row) & available for row in bucket_map):
        with pytest.raises(PlacementError):
            choose_replicas(bucket_map, available)
        return
    chosen = choose_replicas(bucket_map, available)
    assert chosen == choose_replicas(bucket_map, frozenset(available))  # only the map and the set matter
    counts: Counter[int] = Counter()
    for row, be in zip(bucket_map, chosen, strict=True):
        assert be in row and be in available
        candidates = [x for x in row if x in available]
        best = min(counts[x] for x in candidates)
        assert be == next(x for x in candidates if counts[x] == best)  # least chosen, then map order
        counts[be] += 1


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.integers(1, 3), st.integers(1, 100))
def test_a_round_robin_map_spreads_reads_within_one(n, replicas, buckets):
    replicas = min(replicas, n)
    bucket_map = initial_map(one_per_host(n), buckets, replicas)
    counts = Counter(choose_replicas(bucket_map, set(range(1, n + 1))))
    spread = [counts[i] for i in range(1, n + 1)]
    assert max(spread) - min(spread) <= 1
