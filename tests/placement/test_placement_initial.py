"""initial_map: round robin that respects hosts, evens slots, and prefers emptier backends."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from placement_cases import assert_valid, clusters, host_count, one_per_host, slot_counts

from airflow_colocate.core.errors import ColocateError, PlacementError
from airflow_colocate.placement import BackendSlot, initial_map


def test_three_backends_eight_buckets_two_replicas_is_doris_round_robin():
    assert initial_map(one_per_host(3), 8, 2) == [
        [1, 2], [3, 1], [2, 3], [1, 2], [3, 1], [2, 3], [1, 2], [3, 1],
    ]


def test_single_replica_single_bucket():
    assert initial_map(one_per_host(4), 1, 1) == [[1]]


def test_load_puts_a_new_group_on_the_emptier_backends():
    load = {1: 50, 2: 0, 3: 7, 4: 0}
    # order by (load, id): 2, 4, 3, 1
    assert initial_map(one_per_host(4), 2, 1, load) == [[2], [4]]
    assert initial_map(one_per_host(4), 1, 3, load) == [[2, 4, 3]]


def test_down_and_decommissioning_backends_get_nothing():
    backends = [BackendSlot(1, "h1"), BackendSlot(2, "h2", available=False), BackendSlot(3, "h3")]
    assert initial_map(backends, 4, 2) == [[1, 3], [1, 3], [1, 3], [1, 3]]


def test_two_backends_on_one_host_never_share_a_bucket_and_share_the_host_slots():
    backends = [BackendSlot(1, "a"), BackendSlot(2, "a"), BackendSlot(3, "b")]
    result = initial_map(backends, 6, 2)
    assert all(3 in row for row in result)  # host b must be in every bucket
    counts = Counter(be for row in result for be in row)
    assert counts == {3: 6, 1: 3, 2: 3}


def test_the_order_of_the_backend_list_does_not_matter():
    backends = [BackendSlot(i, f"h{i % 4}") for i in range(1, 11)]
    assert initial_map(backends, 17, 3) == initial_map(list(reversed(backends)), 17, 3)


@pytest.mark.parametrize("bucket_num", [0, -1])
def test_bucket_num_below_one_is_refused_with_the_number(bucket_num):
    with pytest.raises(PlacementError, match=rf"bucket_num must be >= 1, got {bucket_num}"):
        initial_map(one_per_host(3), bucket_num, 1)


@pytest.mark.parametrize("replication_num", [0, -2])
def test_replication_num_below_one_is_refused(replication_num):
    with pytest.raises(PlacementError, match="replication_num must be >= 1"):
        initial_map(one_per_host(3), 4, replication_num)


@pytest.mark.parametrize("bad", [1.5, "3", True, None])
def test_non_integer_counts_are_refused(bad):
    with pytest.raises(PlacementError, match="must be an int"):
        initial_map(one_per_host(3), bad, 1)


def test_more_replicas_than_hosts_names_the_numbers_and_the_eligible_backends():
    backends = [BackendSlot(1, "h1"), BackendSlot(2, "h2"), BackendSlot(3, "h2"), BackendSlot(4, "h3", available=False)]
    with pytest.raises(PlacementError) as err:
        initial_map(backends, 8, 3)
    message = str(err.value)
    assert "replication_num 3 needs 3 available backends on distinct hosts" in message
    assert "only 2 host(s) are eligible (be1@h1, be2@h2, be3@h2)" in message
    assert "be4@h3" in message  # the down one is mentioned, so the reader sees why
    assert "add a backend on another host or lower replication_num" in message
    assert isinstance(err.value, ColocateError)


def test_no_backend_at_all():
    with pytest.raises(PlacementError, match="only 0 host"):
        initial_map([], 4, 1)


def test_duplicate_backend_ids_are_refused():
    with pytest.raises(PlacementError, match="backend id 1 is listed twice"):
        initial_map([BackendSlot(1, "a"), BackendSlot(1, "b")], 4, 1)


def test_backend_slot_validates_itself():
    with pytest.raises(PlacementError, match="non-empty host"):
        BackendSlot(1, "")
    with pytest.raises(PlacementError, match="capacity_bytes"):
        BackendSlot(1, "h", capacity_bytes=0)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(1, 64), st.integers(1, 4), st.data())
def test_invariants_on_random_clusters(backends, buckets, replicas, data):
    assume(replicas <= host_count(backends))
    load = data.draw(st.one_of(st.none(), st.dictionaries(st.sampled_from([b.id for b in backends]), st.integers(0, 100))))
    result = initial_map(backends, buckets, replicas, load)
    assert_valid(result, backends, buckets, replicas)

    by_id = {b.id: b for b in backends}
    per_host = Counter(by_id[be].host for row in result for be in row)
    hosts = {b.host for b in backends if b.available}
    host_slots = [per_host[h] for h in hosts]
    assert max(host_slots) - min(host_slots) <= 1

    counts = slot_counts(result, backends)
    for host in hosts:
        mine = [counts[b.id] for b in backends if b.host == host and b.available]
        assert max(mine) - min(mine) <= 1, host
    if all(sum(1 for b in backends if b.host == h and b.available) == 1 for h in hosts):
        assert max(counts.values()) - min(counts.values()) <= 1

    assert initial_map(backends, buckets, replicas, load) == result  # deterministic


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 20), st.integers(1, 3), st.data())
def test_fewer_slots_than_backends_go_to_the_least_loaded(n, replicas, data):
    assume(replicas <= n)
    backends = one_per_host(n)
    load = {b.id: data.draw(st.integers(0, 5)) for b in backends}
    slots = data.draw(st.integers(1, n // replicas)) * replicas
    result = initial_map(backends, slots // replicas, replicas, load)
    used = {be for row in result for be in row}
    assert len(used) == slots
    unused = set(load) - used
    assert max((load[b], b) for b in used) < min(((load[b], b) for b in unused), default=(10**9, 0))
