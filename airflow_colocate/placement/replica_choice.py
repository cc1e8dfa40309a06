"""Which replica of each bucket a colocated join reads.

A colocated join reads bucket *b* of every table from one backend, so the choice must depend on
the group's map only (never on the table): then the two sides of the join meet on the same
backend. Doris likewise picks one backend per bucket seq for the whole fragment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from airflow_colocate.core.errors import PlacementError


def choose_replicas(bucket_map: Sequence[Sequence[int]], available: Collection[int], *,
                    hosts: Mapping[int, str] | None = None,
                    executor_hosts: Collection[str] | None = None) -> list[int]:
    """One backend per bucket seq: the available replica chosen least often so far.

    Why greedy least-chosen: one task per bucket seq reads from the chosen backend, so spreading
    the choices spreads the read load; always taking the primary would pile every read on the
    primaries when a backend is down. Ties go to the earlier entry of the map, so with every
    backend up and a round-robin map the primaries are chosen, and the answer is deterministic.

    With ``hosts`` (backend id -> host) the load that is spread is the hosts' first: bucket *b*'s
    task runs on the host of its replica (local reads), so two backends on one machine share that
    machine's executors. With ``executor_hosts`` too (the hosts that run a Spark executor), a
    replica on such a host wins over one on a host with no executor, whose task could only read
    over the network; when no replica of a bucket is on an executor host, every available one is
    a candidate, as without hosts.

    Raises :class:`PlacementError` for the first bucket with no available replica: that group
    cannot be joined colocated until it is relocated.
    """
    chosen: Counter[int] = Counter()
    on_host: Counter[str] = Counter()
    wanted = None if executor_hosts is None or hosts is None else set(executor_hosts)
    result: list[int] = []
    for seq, row in enumerate(bucket_map):
        candidates = [be for be in row if be in available]
        if wanted is not None:
            near = [be for be in candidates if hosts.get(be) in wanted]
            candidates = near or candidates
        best = None
        for be in candidates:
            if best is None or _load(be, chosen, on_host, hosts) < _load(best, chosen, on_host, hosts):
                best = be
        if best is None:
            raise PlacementError(
                f"bucket {seq} has no available replica: its backends {list(row)} are all down "
                f"or decommissioning; relocate the group (or bring one of them back) before a "
                f"colocated join, or let the join fall back to a shuffle"
            )
        chosen[best] += 1
        if hosts is not None:
            on_host[hosts.get(best, f"backend {best}")] += 1
        result.append(best)
    return result


def _load(be: int, chosen: Counter[int], on_host: Counter[str], hosts: Mapping[int, str] | None) -> tuple[int, int]:
    host = 0 if hosts is None else on_host[hosts.get(be, f"backend {be}")]
    return host, chosen[be]
