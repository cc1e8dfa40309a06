"""Balance: even out bucket seqs over backends, a whole bucket (all tables, all partitions) at a time.

Two strategies, because the seeds only have the first and warn that it fails on unequal backends:

``count``
    Doris's colocate balancer: every available backend should hold the same number of
    (bucket, replica) slots of the group, so a new backend receives ``replicas*buckets/backends``.
``size``
    Bytes against capacity: backend *i* should hold ``total_bytes * cap_i / sum(cap)``. This is
    what keeps a small disk from filling while a big one idles.

Both are greedy over heaps (most loaded → least loaded), so a cluster of 1,000 backends and 200
groups of 256 buckets × 3 replicas balances in about a second of pure Python. Every move keeps the
placement rules: never two replicas of one bucket on one backend or on one host. A move replaces
``src`` by ``dst`` at the same index of the bucket's list, so the primary order stays stable.

Maps given to ``balance`` must name available backends only (run :func:`relocate` first): a move
needs a healthy source to clone from.
"""

from __future__ import annotations

import heapq
import statistics
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Literal

from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement.model import (
    BackendSlot,
    BucketMap,
    check_all_available,
    check_rows,
    index_backends,
)

Strategy = Literal["count", "size"]
_Unit = tuple[int, int]  # (group id, bucket seq)
_Key = tuple[int, int, _Unit]  # (bytes of one replica, scatter, unit): a backend's units in order


@dataclass(frozen=True)
class Move:
    """Clone bucket ``bucket_seq`` (every table of the group) from ``src`` to ``dst``, then drop it
    from ``src``. ``bytes`` is what the clone copies, so a plan can show its cost up front."""

    bucket_seq: int
    src: int
    dst: int
    bytes: int


# --------------------------------------------------------------------------------------------
# Shared working state
# --------------------------------------------------------------------------------------------


def _scatter(group: int, seq: int) -> int:
    """A fixed pseudo-random rank for a unit.

    Units of equal size are scanned in this order rather than by (group, seq): a destination
    that already took the low-numbered groups would otherwise make every later scan walk past
    them, turning the cross-group pass quadratic. Deterministic, unlike ``hash`` of a str.
    """
    x = (group * 0x9E3779B97F4A7C15 + seq * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    x = (x * 0xD6E8FEB86659FD93) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 32)


class _Layout:
    """Bucket rows indexed both ways (unit → backends, backend → units sorted by bytes), so a
    move costs O(log n) bookkeeping and "the smallest movable bucket" is a short forward scan."""

    def __init__(
        self,
        maps: Mapping[int, Sequence[Sequence[int]]],
        host_of: Mapping[int, str],
        unit_bytes: Mapping[_Unit, int],
        backends: Iterable[int],
    ) -> None:
        self.host_of = host_of
        self.rows: dict[_Unit, list[int]] = {}
        self.held: dict[int, list[_Key]] = {be: [] for be in backends}
        self.moves: list[tuple[int, int, int, int, int]] = []  # group, seq, src, dst, bytes
        for group, bucket_map in maps.items():
            for seq, row in enumerate(bucket_map):
                unit = (group, seq)
                self.rows[unit] = list(row)
                key = (unit_bytes.get(unit, 0), _scatter(group, seq), unit)
                for be in row:
                    self.held[be].append(key)
        for keys in self.held.values():
            keys.sort()

    def fits(self, unit: _Unit, src: int, dst: int) -> bool:
        """May ``dst`` take ``src``'s replica of ``unit``? ``src`` is leaving, so its host is free."""
        row = self.rows[unit]
        if dst in row:
            return False
        host_of = self.host_of
        host = host_of[dst]
        for be in row:
            if be != src and host_of[be] == host:
                return False
        return True

    def apply(self, key: _Key, src: int, dst: int) -> None:
        unit = key[2]
        row = self.rows[unit]
        row[row.index(src)] = dst
        keys = self.held[src]
        del keys[bisect_left(keys, key)]
        insort(self.held[dst], key)
        self.moves.append((unit[0], unit[1], src, dst, key[0]))

    def bucket_map(self, group: int, buckets: int) -> BucketMap:
        return [self.rows[(group, seq)] for seq in range(buckets)]


# --------------------------------------------------------------------------------------------
# Count engine
# --------------------------------------------------------------------------------------------


def _even_out_counts(
    layout: _Layout,
    level: dict[int, int],
    prefer: Mapping[int, int],
    min_gap: int,
    budget: int | None,
    group_counts: dict[int, Counter[int]] | None = None,
) -> int:
    """Move one slot at a time from the fullest backend to the emptiest one that can take it.

    ``level`` is what is evened out (slots of one group, or total slots); ``prefer`` breaks ties
    (a source with more, and a destination with fewer, slots elsewhere go first), so a move that
    evens this level also evens the other one when it can. A move needs a gap of ``min_gap`` >= 2:
    with a gap of 1 it would only swap who is fuller. With ``group_counts`` (the cross-group pass)
    a move in group *g* also needs ``src`` to hold more slots of *g* than ``dst``, so the move
    never widens *g*'s own spread.

    Why this is minimal: while every fullest backend can give to an emptiest one (always true
    with one backend per host), sources are a current maximum and destinations a current minimum,
    so no backend is ever both filled and drained and the ``ceil`` shares go to the backends that
    were fullest: the number of moves is the exact minimum. When the host rule forbids every move
    from the fullest backend, it is set aside for the rest of the pass and the pass repeats while
    it makes progress; the result is then a local optimum (no single allowed move narrows a gap of
    ``min_gap`` or more), and since every move narrows a gap of at least 2 it lowers the sum of
    squared levels by at least 2, which bounds the plan. Returns the number of moves made.
    """
    tops = [(-lv, -prefer.get(be, 0), be) for be, lv in level.items()]
    bottoms = [(lv, prefer.get(be, 0), be) for be, lv in level.items()]
    heapq.heapify(tops)
    heapq.heapify(bottoms)
    held = layout.held
    fits = layout.fits
    made = 0

    def first_fit(src: int, dst: int) -> _Key | None:
        for key in held[src]:
            unit = key[2]
            if group_counts is not None:
                counts = group_counts[unit[0]]
                if counts[src] <= counts[dst]:
                    continue
            if fits(unit, src, dst):
                return key
        return None

    def find(src: int) -> tuple[_Key, int] | None:
        limit = level[src] - min_gap
        aside = []
        seen = set()
        found = None
        while bottoms:
            lv, _, dst = bottoms[0]
            if lv != level[dst]:
                heapq.heappop(bottoms)  # stale
                continue
            if lv > limit:
                break
            if dst not in seen:
                seen.add(dst)
                key = first_fit(src, dst)
                if key is not None:
                    found = (key, dst)
                    break
            aside.append(heapq.heappop(bottoms))
        for entry in aside:
            heapq.heappush(bottoms, entry)
        return found

    while True:
        stuck: set[int] = set()
        moved = False
        while budget is None or made < budget:
            src = None
            while tops:
                neg, _, be = tops[0]
                if -neg != level[be] or be in stuck:
                    heapq.heappop(tops)
                    continue
                src = be
                break
            if src is None:
                break
            while bottoms[0][0] != level[bottoms[0][2]]:
                heapq.heappop(bottoms)
            if level[src] - bottoms[0][0] < min_gap:
                break
            found = find(src)
            if found is None:
                stuck.add(src)
                continue
            key, dst = found
            layout.apply(key, src, dst)
            if group_counts is not None:
                counts = group_counts[key[2][0]]
                counts[src] -= 1
                counts[dst] += 1
            level[src] -= 1
            level[dst] += 1
            for be in (src, dst):
                heapq.heappush(tops, (-level[be], -prefer.get(be, 0), be))
                heapq.heappush(bottoms, (level[be], prefer.get(be, 0), be))
            made += 1
            moved = True
        if not stuck or not moved or (budget is not None and made >= budget):
            return made
        for be in stuck:
            heapq.heappush(tops, (-level[be], -prefer.get(be, 0), be))


# --------------------------------------------------------------------------------------------
# Size engine
# --------------------------------------------------------------------------------------------


def _targets(by_id: Mapping[int, BackendSlot], eligible: Sequence[int], total: float) -> dict[int, float]:
    """Fair share of bytes per backend, proportional to capacity. An unknown capacity counts as
    the median of the known ones, so it neither hoards nor starves; all unknown means equal."""
    known = [by_id[be].capacity_bytes for be in eligible if by_id[be].capacity_bytes is not None]
    default = statistics.median(known) if known else 1
    caps = {be: by_id[be].capacity_bytes or default for be in eligible}
    cap_sum = sum(caps.values())
    return {be: total * cap / cap_sum for be, cap in caps.items()}


def _even_out_bytes(
    layout: _Layout,
    cur: dict[int, int],
    target: Mapping[int, float],
    min_gain: float,
    budget: int | None,
) -> int:
    """Move buckets from the backend most over its share (relative to its target) to the one most
    under it, choosing the bucket that shrinks the imbalance most, fewest bytes on a tie.

    With ``a`` bytes over on the source and ``b`` under on the destination, moving ``x`` bytes
    shrinks the total absolute deviation by ``2*min(x, a, b, a+b-x)``; the best bucket is the
    smallest one of at least ``min(a, b)`` bytes if it is at most ``max(a, b)``, else the biggest
    one that fits the deficit (or the smallest one above it, whichever gains more).

    Guaranteed: each move shrinks the sum of ``|bytes - target|`` over backends by a positive
    amount, at least ``min_gain`` (``gain`` = half that shrinkage), so the loop ends and never
    moves bytes without improving the balance. At the end no allowed move from an over-target
    backend to an under-target one has that gain; so with buckets small against the targets
    (each at most a few percent of the smallest target) every backend ends within about one
    bucket of its target, well inside 10% of its fair share. Not guaranteed: the global minimum
    of bytes moved (that is a bin-packing problem); greedy "biggest bucket that fits" is close.
    """

    def rel(be: int) -> float:
        return (cur[be] - target[be]) / target[be]

    tops = [(-rel(be), be, cur[be]) for be in cur]
    bottoms = [(rel(be), be, cur[be]) for be in cur]
    heapq.heapify(tops)
    heapq.heapify(bottoms)
    held = layout.held
    fits = layout.fits
    # A move must gain something real: a hair above float noise, or the caller's threshold.
    floor = max(1e-9 * sum(target.values()) / len(target), min_gain)
    made = 0

    def best_unit(src: int, dst: int) -> tuple[float, _Key] | None:
        a = cur[src] - target[src]
        b = target[dst] - cur[dst]
        lo, hi = min(a, b), max(a, b)
        keys = held[src]
        start = bisect_left(keys, (lo,))
        right = left = None
        for j in range(start, len(keys)):
            key = keys[j]
            if a + b - key[0] < floor and key[0] > hi:
                break
            if fits(key[2], src, dst):
                right = key
                break
        for j in range(start - 1, -1, -1):
            key = keys[j]
            if key[0] < floor:
                break
            if fits(key[2], src, dst):
                left = key
                break
        gain_right = -1.0 if right is None else (lo if right[0] <= hi else a + b - right[0])
        gain_left = -1.0 if left is None else float(left[0])
        if gain_left >= gain_right and left is not None:
            return gain_left, left
        if right is not None:
            return gain_right, right
        return None

    def find(src: int) -> tuple[_Key, int] | None:
        aside = []
        found = None
        while bottoms:
            r, dst, stamp = bottoms[0]
            if stamp != cur[dst]:
                heapq.heappop(bottoms)
                continue
            if r >= 0:
                break
            choice = best_unit(src, dst)
            if choice is not None and choice[0] >= floor:
                found = (choice[1], dst)
                break
            aside.append(heapq.heappop(bottoms))
        for entry in aside:
            heapq.heappush(bottoms, entry)
        return found

    while True:
        stuck: set[int] = set()
        moved = False
        while budget is None or made < budget:
            src = None
            while tops:
                _, be, stamp = tops[0]
                if stamp != cur[be] or be in stuck:
                    heapq.heappop(tops)
                    continue
                src = be
                break
            if src is None or cur[src] <= target[src]:
                break
            found = find(src)
            if found is None:
                stuck.add(src)
                continue
            key, dst = found
            layout.apply(key, src, dst)
            cur[src] -= key[0]
            cur[dst] += key[0]
            for be in (src, dst):
                heapq.heappush(tops, (-rel(be), be, cur[be]))
                heapq.heappush(bottoms, (rel(be), be, cur[be]))
            made += 1
            moved = True
        if not stuck or not moved or (budget is not None and made >= budget):
            return made
        for be in stuck:
            heapq.heappush(tops, (-rel(be), be, cur[be]))


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _check_options(strategy: str, bucket_bytes: object, threshold: float, max_moves: int | None) -> None:
    if strategy not in ("count", "size"):
        raise PlacementError(f"strategy must be 'count' or 'size', got {strategy!r}")
    if strategy == "size" and bucket_bytes is None:
        raise PlacementError(
            "strategy 'size' needs bucket_bytes (bytes of one replica of each bucket, summed over "
            "the group's tables); pass them, or use strategy 'count'"
        )
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or threshold < 0:
        raise PlacementError(f"threshold must be a fraction >= 0 (e.g. 0.1 for 10%), got {threshold!r}")
    bad_int = isinstance(max_moves, bool) or not isinstance(max_moves, int)
    if max_moves is not None and (bad_int or max_moves < 0):
        raise PlacementError(f"max_moves must be an int >= 0 or None for no limit, got {max_moves!r}")


def _unit_bytes(group: int, buckets: int, bucket_bytes: Mapping[int, int] | None) -> dict[_Unit, int]:
    if not bucket_bytes:
        return {}
    sizes = {}
    for seq in range(buckets):
        size = bucket_bytes.get(seq, 0)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise PlacementError(f"bucket_bytes[{seq}] of group {group} must be an int >= 0, got {size!r}")
        sizes[(group, seq)] = size
    return sizes


def _prepare(backends: Sequence[BackendSlot]) -> tuple[dict[int, BackendSlot], list[int], dict[int, str]]:
    by_id = index_backends(backends)
    eligible = sorted(be for be, slot in by_id.items() if slot.available)
    if not eligible:
        raise PlacementError("no backend is available: bring one up before balancing")
    return by_id, eligible, {be: slot.host for be, slot in by_id.items()}


def _moves_by_group(layout: _Layout) -> dict[int, list[Move]]:
    by_group: dict[int, list[Move]] = {}
    for g, seq, src, dst, size in layout.moves:
        by_group.setdefault(g, []).append(Move(seq, src, dst, size))
    return by_group


def balance(
    bucket_map: Sequence[Sequence[int]],
    backends: Sequence[BackendSlot],
    *,
    strategy: Strategy = "count",
    bucket_bytes: Mapping[int, int] | None = None,
    load: Mapping[int, int] | None = None,
    threshold: float = 0.0,
    max_moves: int | None = None,
) -> tuple[BucketMap, list[Move]]:
    """Balance one group; return the new map and the moves that lead there, in order.

    ``count``: moves replicas from the fullest to the emptiest available backend until slots per
    backend differ by at most one (or the host rule forbids every further move). A new empty
    backend receives ``replicas*buckets/backends`` slots, rounded either way. Ties go to moves
    that also even out ``load`` (slots of other groups per backend), then to the fewest bytes
    (``bucket_bytes``). With one backend per host the number of moves is the minimum: the sum over
    backends of what they hold above their final ``floor``/``ceil`` share (see
    :func:`_even_out_counts`).

    ``size``: moves bytes toward ``total * cap_i / sum(cap)``, counting ``load`` (bytes of other
    groups) on each backend, so one group can make room on a full disk. See
    :func:`_even_out_bytes` for what is guaranteed.

    ``threshold`` skips moves that gain little: a count move needs a gap of at least
    ``threshold * average slots`` between source and destination, a size move must shrink the
    imbalance by at least ``threshold * average target bytes``. ``max_moves`` caps the plan, so a
    balance job can proceed in rounds; each round is itself a valid prefix.
    """
    _check_options(strategy, bucket_bytes, threshold, max_moves)
    by_id, eligible, host_of = _prepare(backends)
    check_rows(bucket_map)
    check_all_available(bucket_map, by_id)
    load = load or {}
    sizes = _unit_bytes(0, len(bucket_map), bucket_bytes)
    layout = _Layout({0: bucket_map}, host_of, sizes, eligible)
    if strategy == "count":
        level = dict.fromkeys(eligible, 0)
        for row in bucket_map:
            for be in row:
                level[be] += 1
        avg = sum(level.values()) / len(level)
        _even_out_counts(layout, level, load, max(2, ceil(threshold * avg)), max_moves)
    else:
        cur = {be: load.get(be, 0) for be in eligible}
        for unit, row in layout.rows.items():
            for be in row:
                cur[be] += sizes.get(unit, 0)
        total = sum(cur.values())
        if total > 0:
            target = _targets(by_id, eligible, total)
            _even_out_bytes(layout, cur, target, threshold * total / len(eligible), max_moves)
    return layout.bucket_map(0, len(bucket_map)), _moves_by_group(layout).get(0, [])


def balance_all(
    groups: Mapping[int, Sequence[Sequence[int]]],
    backends: Sequence[BackendSlot],
    *,
    strategy: Strategy = "count",
    bucket_bytes: Mapping[int, Mapping[int, int]] | None = None,
    load: Mapping[int, int] | None = None,
    threshold: float = 0.0,
    max_moves: int | None = None,
) -> tuple[dict[int, BucketMap], dict[int, list[Move]]]:
    """Balance every group, then the cluster as a whole; return new maps and moves per group id.

    ``count`` runs two passes:

    1. each group on its own (as :func:`balance`), in group-id order, preferring moves that also
       even out the slots the other groups already put on each backend;
    2. across groups: slots are moved from the backend with the most slots in total to the one
       with the fewest, each move inside one group and only where the source holds more of that
       group than the destination. Such a move keeps every group's own spread, and some group
       always allows one between two backends whose totals differ, so with one backend per host
       (and no outside ``load`` too big to absorb) every group ends within one slot per backend
       and the totals end within one slot too, with the minimum number of pass-2 moves.

    ``size`` pools the buckets of all groups and balances total bytes against capacity (a disk
    does not care which group filled it); each move is still one bucket of one group, and
    ``bucket_bytes`` maps group id → bucket seq → bytes of one replica.

    ``load`` is counted on top of the groups given (slots or bytes of groups not passed in);
    ``threshold`` and ``max_moves`` mean what they mean for :func:`balance`, ``max_moves`` over
    all groups together.
    """
    _check_options(strategy, bucket_bytes, threshold, max_moves)
    by_id, eligible, host_of = _prepare(backends)
    for group, bucket_map in groups.items():
        if isinstance(group, bool) or not isinstance(group, int):
            raise PlacementError(f"group ids must be ints, got {group!r}")
        check_rows(bucket_map, f"group {group}")
        check_all_available(bucket_map, by_id, f"group {group}")
    load = load or {}
    order = sorted(groups)
    maps: dict[int, BucketMap] = {g: [list(row) for row in groups[g]] for g in order}
    moves: dict[int, list[Move]] = {g: [] for g in order}
    sizes: dict[_Unit, int] = {}
    for g in order:
        sizes.update(_unit_bytes(g, len(maps[g]), (bucket_bytes or {}).get(g)))

    if strategy == "size":
        layout = _Layout(maps, host_of, sizes, eligible)
        cur = {be: load.get(be, 0) for be in eligible}
        for unit, row in layout.rows.items():
            for be in row:
                cur[be] += sizes.get(unit, 0)
        total = sum(cur.values())
        if total > 0:
            target = _targets(by_id, eligible, total)
            _even_out_bytes(layout, cur, target, threshold * total / len(eligible), max_moves)
        made = _moves_by_group(layout)
        for g in order:
            maps[g] = layout.bucket_map(g, len(maps[g]))
            moves[g] = made.get(g, [])
        return maps, moves

    budget = max_moves
    group_counts: dict[int, Counter[int]] = {}
    totals = {be: load.get(be, 0) for be in eligible}
    for g in order:
        counts = Counter(be for row in maps[g] for be in row)
        group_counts[g] = counts
        for be, n in counts.items():
            totals[be] += n

    # Pass 1: each group on its own.
    for g in order:
        counts = group_counts[g]
        slots = sum(counts.values())
        if not slots:
            continue
        gap = max(2, ceil(threshold * slots / len(eligible)))
        low = 0 if len(counts) < len(eligible) else min(counts.values())
        if max(counts.values()) - low < gap or budget == 0:
            continue
        layout = _Layout({g: maps[g]}, host_of, sizes, eligible)
        level = {be: counts[be] for be in eligible}
        others = {be: totals[be] - level[be] for be in eligible}
        made = _even_out_counts(layout, level, others, gap, budget)
        if budget is not None:
            budget -= made
        maps[g] = layout.bucket_map(g, len(maps[g]))
        moves[g].extend(_moves_by_group(layout).get(g, []))
        group_counts[g] = Counter({be: n for be, n in level.items() if n})
        for be in eligible:
            totals[be] = others[be] + level[be]

    # Pass 2: across groups.
    gap = max(2, ceil(threshold * sum(totals.values()) / len(eligible)))
    if budget != 0 and max(totals.values()) - min(totals.values()) >= gap:
        layout = _Layout(maps, host_of, sizes, eligible)
        _even_out_counts(layout, totals, {}, gap, budget, group_counts)
        made_by_group = _moves_by_group(layout)
        for g in order:
            maps[g] = layout.bucket_map(g, len(maps[g]))
            moves[g].extend(made_by_group.get(g, []))
    return maps, moves
