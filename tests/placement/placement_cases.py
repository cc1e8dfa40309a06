"""Cluster and map generators shared by the placement tests, plus the invariant checks.

Kept in one place so every test checks the placement rules the same way.
"""

from __future__ import annotations

import random
from collections import Counter
from math import ceil

from hypothesis import strategies as st

from airflow_colocate.placement import BackendSlot, Move


@st.composite
def clusters(draw, *, min_hosts=1, max_hosts=8, max_per_host=3, p_down=0.2, capacities=False):
    """Random hosts with 1..max_per_host backends each; some backends down."""
    hosts = draw(st.integers(min_hosts, max_hosts))
    backends = []
    next_id = draw(st.integers(1, 5))
    for h in range(hosts):
        for _ in range(draw(st.integers(1, max_per_host))):
            down = draw(st.floats(0, 1)) < p_down
            cap = draw(st.one_of(st.none(), st.integers(1, 4))) if capacities else None
            backends.append(BackendSlot(next_id, f"h{h}", cap and cap * 1000, not down))
            next_id += draw(st.integers(1, 3))
    return backends


def one_per_host(n: int, start: int = 1) -> list[BackendSlot]:
    return [BackendSlot(i, f"h{i}") for i in range(start, start + n)]


def random_map(rng: random.Random, backends, buckets: int, replicas: int, skew: float = 1.0) -> list[list[int]]:
    """A valid but lopsided map over the available backends: backends early in a shuffled order
    are ``skew`` times likelier per rank to be picked, so balancers have real work to do."""
    avail = [b for b in backends if b.available]
    rng.shuffle(avail)
    weights = [skew ** -rank for rank in range(len(avail))]
    result = []
    for _ in range(buckets):
        row, hosts = [], set()
        while len(row) < replicas:
            free = [(b, w) for b, w in zip(avail, weights) if b.host not in hosts]
            b = rng.choices([b for b, _ in free], [w for _, w in free])[0]
            row.append(b.id)
            hosts.add(b.host)
        result.append(row)
    return result


def host_count(backends) -> int:
    return len({b.host for b in backends if b.available})


def assert_valid(bucket_map, backends, buckets: int, replicas: int) -> None:
    """Every bucket: `replicas` available backends, all distinct, on distinct hosts."""
    by_id = {b.id: b for b in backends}
    assert len(bucket_map) == buckets
    for seq, row in enumerate(bucket_map):
        assert len(row) == replicas, (seq, row)
        assert len(set(row)) == replicas, (seq, row)
        assert all(by_id[be].available for be in row), (seq, row)
        assert len({by_id[be].host for be in row}) == replicas, (seq, row)


def slot_counts(bucket_map, backends) -> Counter:
    counts = Counter({b.id: 0 for b in backends if b.available})
    counts.update(be for row in bucket_map for be in row)
    return counts


def replay(bucket_map, moves: list[Move]) -> list[list[int]]:
    """Apply moves in order, checking each names a real replica: the plan must be executable."""
    rows = [list(r) for r in bucket_map]
    for m in moves:
        row = rows[m.bucket_seq]
        assert m.src in row and m.dst not in row, m
        row[row.index(m.src)] = m.dst
    return rows


def ceil_lower_bound(counts: Counter) -> int:
    """The brief's bound: every slot above ceil(avg) must move at least once."""
    avg = sum(counts.values()) / len(counts)
    return sum(max(0, n - ceil(avg)) for n in counts.values())


def exact_min_moves(counts: Counter) -> int:
    """Fewest one-slot moves that leave every count at floor(avg) or ceil(avg): give the ceilings
    to the fullest backends, then count what is above each one's target."""
    n, total = len(counts), sum(counts.values())
    floor, extra = divmod(total, n)
    targets = [floor + 1] * extra + [floor] * (n - extra)
    return sum(max(0, x - t) for x, t in zip(sorted(counts.values(), reverse=True), targets))
