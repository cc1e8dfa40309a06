"""Repair: give every bucket that lost a backend a new one.

Doris's colocate balancer replaces a backend that has been down too long, or is being
decommissioned, with the least-loaded eligible backend and then clones the bucket there. This
module is the "choose" half of that; cloning is the storage layer's job.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence

from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement.model import BackendSlot, BucketMap, check_rows, index_backends


def relocate(
    bucket_map: Sequence[Sequence[int]],
    backends: Sequence[BackendSlot],
    load: Mapping[int, int] | None = None,
) -> BucketMap:
    """Replace each unavailable or unknown backend in the map, touching nothing else.

    Why the rules:

    * Healthy entries stay at their index, and a replacement takes the index of the backend it
      replaces, so the primary of a bucket only changes when the primary itself died. A repair
      should never cause a second, unrelated data movement.
    * A replacement is the eligible backend (available, not already holding the bucket, not on a
      host that already holds it) with the fewest slots of *this* group, counting the healthy
      entries of the whole map plus the replacements chosen so far; then the fewest slots of other
      groups (``load``); then the lowest id. Counting the whole map first (not bucket by bucket)
      keeps early buckets from all landing on a backend that later buckets already fill.
    * The host of the backend being replaced does not block its replacement: that backend is
      leaving the bucket, so a sibling on the same host is a fine new home.
    * A map that names no unavailable backend comes back unchanged (as a new list).

    Every bucket keeps its length, so ``replication_num`` entries stay ``replication_num``
    entries: a backend that is the only healthy holder of a bucket is never removed.
    Raises :class:`PlacementError` naming the first bucket that has no eligible replacement.
    """
    check_rows(bucket_map)
    by_id = index_backends(backends)
    load = load or {}

    def healthy(be: int) -> bool:
        slot = by_id.get(be)
        return slot is not None and slot.available

    slots: Counter[int] = Counter(be for row in bucket_map for be in row if healthy(be))
    # Min-heap of (slots in this group, external load, id); entries go stale when a backend takes
    # a replacement and are skipped when their slot count no longer matches.
    heap = [(slots[b.id], load.get(b.id, 0), b.id) for b in by_id.values() if b.available]
    heapq.heapify(heap)

    result: BucketMap = []
    for seq, row in enumerate(bucket_map):
        new_row = list(row)
        keep = [be for be in row if healthy(be)]
        if len(keep) == len(row):
            result.append(new_row)
            continue
        holders = set(keep)
        hosts = {by_id[be].host for be in keep}
        for index, be in enumerate(row):
            if healthy(be):
                continue
            skipped = []
            chosen = None
            while heap:
                entry = heapq.heappop(heap)
                count, _, candidate = entry
                if count != slots[candidate]:
                    continue  # stale
                if candidate in holders or by_id[candidate].host in hosts:
                    skipped.append(entry)
                    continue
                chosen = candidate
                break
            for entry in skipped:
                heapq.heappush(heap, entry)
            if chosen is None:
                lost = by_id[be].label if be in by_id else f"backend {be}"
                why = "is down or decommissioning" if be in by_id else "is not among the backends given"
                available = sum(1 for b in by_id.values() if b.available)
                raise PlacementError(
                    f"bucket {seq} cannot replace {lost} (it {why}): none of the {available} "
                    f"available backends is free of the hosts already holding bucket {seq} "
                    f"({', '.join(sorted(hosts)) or 'none'}); add a backend on another host, "
                    f"bring {lost} back, or lower replication_num"
                )
            new_row[index] = chosen
            holders.add(chosen)
            hosts.add(by_id[chosen].host)
            slots[chosen] += 1
            heapq.heappush(heap, (slots[chosen], load.get(chosen, 0), chosen))
        result.append(new_row)
    return result
