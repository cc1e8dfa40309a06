"""Balance a skewed 1,000-backend cluster with 200 colocation groups and print the figures.

The layout: every group was created (round robin, emptier backends first) while only 800
backends existed; then 200 empty backends joined. ``balance_all`` must spread the groups over all
1,000 with close to the fewest possible moves, in pure Python, in under 2 seconds.

Run: ``python bench/bench_placement.py``. One figure per line.
"""

from __future__ import annotations

import time
from collections import Counter
from math import ceil

from airflow_colocate.placement import BackendSlot, balance_all, initial_map

OLD_BACKENDS = 800
NEW_BACKENDS = 200
GROUPS = 200
BUCKETS = 256
REPLICAS = 3


def main() -> None:
    old = [BackendSlot(i, f"h{i}") for i in range(1, OLD_BACKENDS + 1)]
    load: Counter[int] = Counter()
    groups = {}
    for g in range(GROUPS):
        groups[g] = initial_map(old, BUCKETS, REPLICAS, load)
        load.update(be for row in groups[g] for be in row)
    everyone = old + [BackendSlot(i, f"h{i}") for i in range(OLD_BACKENDS + 1, OLD_BACKENDS + NEW_BACKENDS + 1)]

    totals = Counter({b.id: 0 for b in everyone})
    totals.update(load)
    ceil_avg = ceil(sum(totals.values()) / len(totals))
    lower_bound = sum(max(0, n - ceil_avg) for n in totals.values())

    start = time.perf_counter()
    new_maps, moves = balance_all(groups, everyone)
    seconds = time.perf_counter() - start

    made = sum(len(m) for m in moves.values())
    after = Counter({b.id: 0 for b in everyone})
    after.update(be for m in new_maps.values() for row in m for be in row)
    group_spread = max(
        max(c.values()) - (0 if len(c) < len(everyone) else min(c.values()))
        for c in (Counter(be for row in m for be in row) for m in new_maps.values())
    )
    print(f"balance_all seconds: {seconds:.3f} (target < 2)")
    print(f"moves made: {made}")
    print(f"moves lower bound (sum of max(0, load - ceil(avg))): {lower_bound}")
    print(f"moves / lower bound: {made / lower_bound:.4f} (target <= 1.05)")
    print(f"total slots per backend after: min {min(after.values())} max {max(after.values())}")
    print(f"largest per-group spread after (max - min slots): {group_spread}")


if __name__ == "__main__":
    main()
