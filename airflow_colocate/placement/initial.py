"""The first bucket map of a group, made when its parent table is created.

Doris picks the backends of the parent table's first partition round robin over alive backends,
and that map becomes the map of the whole group. We do the same, with two additions the seeds
lack: the host rule is enforced while choosing (not checked afterwards), and backends already busy
with other groups come last in the rotation, so a new group lands on the emptier backends instead
of piling onto backend 1 every time.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement.model import BackendSlot, BucketMap, describe, index_backends


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlacementError(f"{name} must be an int >= 1, got {value!r}")
    if value < 1:
        raise PlacementError(
            f"{name} must be >= 1, got {value}: a group needs at least one bucket and one replica"
        )
    return value


def initial_map(
    backends: Sequence[BackendSlot],
    bucket_num: int,
    replication_num: int,
    load: Mapping[int, int] | None = None,
) -> BucketMap:
    """Round robin over hosts, then over the backends of each host.

    Why hosts first: two replicas of a bucket may never share a host, so the host is the scarce
    resource. Each bucket takes the ``replication_num`` hosts that hold the fewest slots so far
    (ties broken by the emptiest backend of the host, then id). With one backend per host this is
    exactly Doris's round robin over the backends sorted by ``(load, id)``. Inside a host the
    backend with the fewest slots (then ``(load, id)``) takes the slot.

    Guarantees, for any input that passes validation:

    * every bucket gets exactly ``replication_num`` distinct backends on distinct hosts;
    * slots per host differ by at most one (always possible, since a host can take one replica of
      every bucket), so with one backend per host slots per backend differ by at most one;
    * inside one host, slots per backend differ by at most one;
    * only available backends are used; ``load`` (slots of other groups per backend) orders the
      rotation, so the extra slot of an uneven division goes to the emptier backends.
    """
    _check_count("bucket_num", bucket_num)
    _check_count("replication_num", replication_num)
    by_id = index_backends(backends)
    load = load or {}

    eligible = sorted((b for b in by_id.values() if b.available), key=lambda b: (load.get(b.id, 0), b.id))
    by_host: dict[str, list[BackendSlot]] = {}
    for backend in eligible:
        by_host.setdefault(backend.host, []).append(backend)
    if len(by_host) < replication_num:
        down = [b for b in by_id.values() if not b.available]
        hint = f"; {len(down)} more are down or decommissioning ({describe(down)})" if down else ""
        raise PlacementError(
            f"replication_num {replication_num} needs {replication_num} available backends on "
            f"distinct hosts, but only {len(by_host)} host(s) are eligible "
            f"({describe(eligible)}){hint}: add a backend on another host or lower replication_num"
        )

    # One heap entry per host: (slots on the host, host rank, host). The rank is the position of
    # the host's emptiest backend in the (load, id) order, which keeps the rotation stable.
    host_heap: list[tuple[int, int, str]] = []
    backend_heaps: dict[str, list[tuple[int, int, int]]] = {}
    for rank, backend in enumerate(eligible):
        if backend.host not in backend_heaps:
            host_heap.append((0, rank, backend.host))
            backend_heaps[backend.host] = []
        backend_heaps[backend.host].append((0, load.get(backend.id, 0), backend.id))
    heapq.heapify(host_heap)
    for heap in backend_heaps.values():
        heapq.heapify(heap)

    result: BucketMap = []
    for _ in range(bucket_num):
        # Popping replication_num entries yields distinct hosts, because each host has one entry.
        taken = [heapq.heappop(host_heap) for _ in range(replication_num)]
        row = []
        for slots, rank, host in taken:
            heap = backend_heaps[host]
            b_slots, b_load, b_id = heap[0]
            heapq.heapreplace(heap, (b_slots + 1, b_load, b_id))
            row.append(b_id)
            heapq.heappush(host_heap, (slots + 1, rank, host))
        result.append(row)
    return result
