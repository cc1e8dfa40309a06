"""Which replica of each bucket a colocated join reads.

A colocated join reads bucket *b* of every table from one backend, so the choice must depend on
the group's map only (never on the table): then the two sides of the join meet on the same
backend. Doris likewise picks one backend per bucket seq for the whole fragment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from airflow_colocate.core.errors import PlacementError


def choose_replicas(bucket_map: Sequence[Sequence[int]], available: Collection[int]) -> list[int]:
    """One backend per bucket seq: the available replica chosen least often so far.

    Why greedy least-chosen: one task per bucket seq reads from the chosen backend, so spreading
    the choices spreads the read load; always taking the primary would pile every read on the
    primaries when a backend is down. Ties go to the earlier entry of the map, so with every
    backend up and a round-robin map the primaries are chosen, and the answer is deterministic.
    Raises :class:`PlacementError` for the first bucket with no available replica: that group
    cannot be joined colocated until it is relocated.
    """
    chosen: Counter[int] = Counter()
    result: list[int] = []
    for seq, row in enumerate(bucket_map):
        best = None
        for be in row:
            if be in available and (best is None or chosen[be] < chosen[best]):
                best = be
        if best is None:
            raise PlacementError(
                f"bucket {seq} has no available replica: its backends {list(row)} are all down "
                f"or decommissioning; relocate the group (or bring one of them back) before a "
                f"colocated join, or let the join fall back to a shuffle"
            )
        chosen[best] += 1
        result.append(best)
    return result
