"""choose_replicas on a multi-host cluster (issue 17): the reads are spread over hosts first, and a
replica on a host that runs an executor wins over one on a host without (its task could only read
over the network)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_colocate.placement import choose_replicas


def test_two_backends_on_one_host_share_its_reads():
    # backends 1 and 2 are on host a, 3 on host b; every bucket has a replica on each host
    bucket_map = [[1, 3], [2, 3], [1, 3], [2, 3]]
    hosts = {1: "a", 2: "a", 3: "b"}
    by_backend = choose_replicas(bucket_map, {1, 2, 3})
    assert by_backend == [1, 2, 3, 2]  # spread over backends: host a serves 3 of 4 tasks
    by_host = choose_replicas(bucket_map, {1, 2, 3}, hosts=hosts)
    assert by_host == [1, 3, 1, 3]
    assert Counter(hosts[b] for b in by_host) == {"a": 2, "b": 2}


def test_without_hosts_the_answer_is_unchanged_when_every_backend_is_its_own_host():
    bucket_map = [[1, 2], [2, 3], [3, 1], [1, 2], [2, 3], [3, 1]]
    hosts = {1: "h1", 2: "h2", 3: "h3"}
    for available in ({1, 2, 3}, {2, 3}, {1, 3}):
        assert choose_replicas(bucket_map, available, hosts=hosts) == choose_replicas(bucket_map, available)


def test_a_replica_on_an_executor_host_wins():
    # backend 1 is on host c, where no executor runs: bucket 0 and 1 read backend 2 although that
    # piles both reads on it; bucket 2 has no replica near an executor and takes what there is
    bucket_map = [[1, 2], [1, 2], [1, 3]]
    hosts = {1: "c", 2: "a", 3: "c"}
    assert choose_replicas(bucket_map, {1, 2, 3}, hosts=hosts, executor_hosts={"a", "b"}) == [2, 2, 1]
    assert choose_replicas(bucket_map, {1, 2, 3}, hosts=hosts) == [1, 2, 3]


def test_executor_hosts_without_backend_hosts_change_nothing():
    bucket_map = [[1, 2], [1, 2]]
    assert choose_replicas(bucket_map, {1, 2}, executor_hosts={"x"}) == choose_replicas(bucket_map, {1, 2})


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True), min_size=1, max_size=60),
    st.dictionaries(st.integers(1, 8), st.sampled_from("abcd"), min_size=8, max_size=8),
    st.sets(st.sampled_from("abcd")),
)
def test_choice_prefers_executor_hosts_then_least_loaded_host(bucket_map, hosts, executors):
    available = set(range(1, 9))
    chosen = choose_replicas(bucket_map, available, hosts=hosts, executor_hosts=executors)
    assert chosen == choose_replicas(bucket_map, available, hosts=hosts, executor_hosts=executors)
    per_host: Counter[str] = Counter()
    per_backend: Counter[int] = Counter()
    for row, be in zip(bucket_map, chosen, strict=True):
        assert be in row
        near = [x for x in row if hosts[x] in executors]
        candidates = near or list(row)
        assert be in candidates  # an executor's host whenever the bucket has a replica there
        best = min((per_host[hosts[x]], per_backend[x]) for x in candidates)
        assert (per_host[hosts[be]], per_backend[be]) == best  # least-loaded host, then backend
        per_host[hosts[be]] += 1
        per_backend[be] += 1
