"""Balance: even out bucket seqs over backends, a whole bucket (all tables, all partitions) at a time.

One greedy loop (:func:`_even_out`) moves a bucket from the fullest backend to the emptiest one
that may take it; the :class:`~airflow_colocate.placement.strategies.BalanceStrategy` given says
what "full" means (``count`` or ``size``, see :mod:`airflow_colocate.placement.strategies`). So the
placement rules (never two replicas of one bucket on one backend or on one host), the heaps and the
``max_moves`` prefix are written once, and a new strategy is a value, not another copy of the loop.

A move replaces ``src`` by ``dst`` at the same index of the bucket's list, so the primary order
stays stable. Maps given to ``balance`` must name available backends only (run :func:`relocate`
first): a move needs a healthy source to clone from. 1,000 backends and 200 groups of 256 buckets ×
3 replicas balance in about a second of pure Python (``bench/bench_placement.py``).
"""

from __future__ import annotations

import heapq
import statistics
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement.model import (
    BackendSlot,
    BucketMap,
    check_all_available,
    check_maps,
    check_rows,
    index_backends,
)
from airflow_colocate.placement.strategies import (  # noqa: F401  (re-exported: the loop's vocabulary)
    COUNT,
    DISTANCES,
    SIZE,
    SQUARES,
    STRATEGIES,
    BalanceStrategy,
    Bucket,
    Objective,
    UnknownStrategy,
    resolve_strategy,
)

_Unit = tuple[int, int]  # (group id, bucket seq)
_Key = tuple[float, int, int, _Unit]  # (cost, bytes of one replica, scatter, unit): a backend's units in order
_AFTER = float("inf")  # (cost, _AFTER) sorts after every key of that cost


@dataclass(frozen=True)
class Move:
    """Clone bucket ``bucket_seq`` (every table of the group) from ``src`` to ``dst``, then drop it
    from ``src``. ``bytes`` is what the clone copies, so a plan can show its cost up front."""

    bucket_seq: int
    src: int
    dst: int
    bytes: int


# What Bucket(...) does, minus a Python-level __new__: one is built per bucket per call.
_new_bucket = tuple.__new__
_NUMBERS = frozenset({int, float})



# --------------------------------------------------------------------------------------------
# Shared working state
# --------------------------------------------------------------------------------------------


def _scatter(group: int, seq: int) -> int:
    """A fixed pseudo-random rank for a unit.

    Units of equal cost are scanned in this order rather than by (group, seq): a destination
    that already took the low-numbered groups would otherwise make every later scan walk past
    them, turning the cross-group pass quadratic. Deterministic, unlike ``hash`` of a str.
    """
    x = (group * 0x9E3779B97F4A7C15 + seq * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    x = (x * 0xD6E8FEB86659FD93) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 32)


class _Layout:
    """Bucket rows indexed both ways (unit → backends, backend → units sorted by cost), so a move
    costs O(log n) bookkeeping and "the best bucket to move" is a short scan from a bisection."""

    def __init__(self, maps: Mapping[int, Sequence[Sequence[int]]], call: _Balancer) -> None:
        self.host_of = call.host_of
        self.call = call
        self.allowed = call.strategy.allowed
        self.rows: dict[_Unit, list[int]] = {}
        self.held: dict[int, list[_Key]] = {be: [] for be in call.eligible}
        self.moves: list[tuple[int, int, int, int, int]] = []  # group, seq, src, dst, bytes
        rows = self.rows
        held = self.held
        for group, bucket_map in maps.items():
            for key, row in zip(call.keys[group], bucket_map):
                rows[key[3]] = list(row)
                for be in row:
                    held[be].append(key)
        for units in held.values():
            units.sort()

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
        return self.allowed is None or bool(self.allowed(self.call.bucket(unit), self.call.by_id[dst]))

    def apply(self, key: _Key, src: int, dst: int) -> None:
        unit = key[3]
        row = self.rows[unit]
        row[row.index(src)] = dst
        keys = self.held[src]
        del keys[bisect_left(keys, key)]
        insort(self.held[dst], key)
        self.moves.append((unit[0], unit[1], src, dst, key[1]))

    def bucket_map(self, group: int, buckets: int) -> BucketMap:
        return [self.rows[(group, seq)] for seq in range(buckets)]

    def moves_by_group(self) -> dict[int, list[Move]]:
        by_group: dict[int, list[Move]] = {}
        for g, seq, src, dst, size in self.moves:
            by_group.setdefault(g, []).append(Move(seq, src, dst, size))
        return by_group


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


def _even_out(
    layout: _Layout,
    objective: Objective,
    level: dict[int, float],
    target: Mapping[int, float],
    prefer: Mapping[int, float],
    floor: float,
    budget: int | None,
    group_counts: dict[int, Counter[int]] | None = None,
    by_level: bool = False,
) -> int:
    """Move one bucket at a time from the top-ranked backend to the lowest-ranked one that can
    take a bucket gaining at least ``floor``; return the number of moves made.

    ``level`` is what is evened out (updated in place); ``prefer`` breaks rank ties (a source
    with more, and a destination with less, elsewhere go first), so a move that evens this level
    also evens the other one when it can. Of a source's buckets, the one with the best gain is
    moved, the fewest bytes on a tie. With ``group_counts`` (the cross-group pass) a move in group
    *g* also needs ``src`` to hold more slots of *g* than ``dst``, so it never widens *g*'s spread.
    A source that can give nothing is set aside for the rest of the pass; the pass repeats while
    it makes progress. What the result promises is the objective's to say. ``by_level``: all targets
    are equal, so the heaps order by level itself (rank rises with level; this skips a call per
    entry and keeps integer levels exact).
    """
    rank, opens, peak_of, gain = objective.rank, objective.opens, objective.peak, objective.gain
    push, pop, heapify = heapq.heappush, heapq.heappop, heapq.heapify
    ranks = {be: lv if by_level else rank(lv, target[be]) for be, lv in level.items()}
    tops = [(-ranks[be], -prefer.get(be, 0), be, level[be]) for be in level]
    bottoms = [(ranks[be], prefer.get(be, 0), be, level[be]) for be in level]
    heapify(tops)
    heapify(bottoms)
    held = layout.held
    fits = layout.fits
    made = 0

    def first_fit(keys: list[_Key], i: int, end: int, src: int, dst: int) -> _Key | None:
        """The first of ``keys[i:end]`` that ``dst`` may take."""
        scan = keys if i == 0 and end == len(keys) else islice(keys, i, end)
        if group_counts is None:
            for key in scan:
                if fits(key[3], src, dst):
                    return key
            return None
        counts_of = group_counts
        for key in scan:
            unit = key[3]
            counts = counts_of[unit[0]]
            if counts[src] > counts[dst] and fits(unit, src, dst):
                return key
        return None

    def pick(keys: list[_Key], src: int, dst: int, ls: float, ts: float, ld: float, td: float) -> _Key | None:
        """The bucket of ``src`` with the best gain, searched outward from the peak one run of
        equal costs at a time; in a run the first in key order wins (fewest bytes)."""
        n = len(keys)
        peak = peak_of(ls, ts, ld, td)
        start = 0 if peak <= keys[0][0] else n if peak > keys[n - 1][0] else bisect_left(keys, (peak,))
        right = left = None
        i = start
        while i < n:
            cost = keys[i][0]
            if cost > peak and gain(ls, ts, ld, td, cost) < floor:
                break  # past the peak the gain only falls
            end = bisect_left(keys, (cost, _AFTER), i)
            right = first_fit(keys, i, end, src, dst)
            if right is not None:
                break
            i = end
        j = start - 1
        while j >= 0:
            cost = keys[j][0]
            if gain(ls, ts, ld, td, cost) < floor:
                break  # below the peak the gain only falls
            i = j if j == 0 or keys[j - 1][0] != cost else bisect_left(keys, (cost,), 0, j)
            left = first_fit(keys, i, j + 1, src, dst)
            if left is not None:
                break
            j = i - 1
        gain_left = -1.0 if left is None else gain(ls, ts, ld, td, left[0])
        gain_right = -1.0 if right is None else gain(ls, ts, ld, td, right[0])
        if left is not None and gain_left >= gain_right:
            return left if gain_left >= floor else None
        if right is not None:
            return right if gain_right >= floor else None
        return None

    def find(src: int) -> tuple[_Key | None, int]:
        """A move ``(bucket, dst)`` from ``src``; else ``(None, 0)`` if ``src`` is stuck, or
        ``(None, -1)`` if nothing opens even against the lowest-ranked backend (then nothing is
        left to gain anywhere)."""
        aside = []
        seen = set()
        found: tuple[_Key | None, int] = (None, -1)
        ls, ts = level[src], target[src]
        keys = held[src]
        n = len(keys)
        one_cost = keys[0][0] if n and keys[0][0] == keys[n - 1][0] else None  # then all gain alike
        while bottoms:
            entry = bottoms[0]
            dst = entry[2]
            if entry[3] != level[dst]:
                pop(bottoms)  # stale
                continue
            ld, td = level[dst], target[dst]
            if not opens(ls, ts, ld, td, floor):
                break
            found = (None, 0)
            if n and dst not in seen:
                seen.add(dst)
                if one_cost is None:
                    key = pick(keys, src, dst, ls, ts, ld, td)
                elif gain(ls, ts, ld, td, one_cost) >= floor:
                    key = first_fit(keys, 0, n, src, dst)
                else:
                    key = None
                if key is not None:
                    found = (key, dst)
                    break
            aside.append(pop(bottoms))
        for entry in aside:
            push(bottoms, entry)
        return found

    while True:
        stuck: set[int] = set()
        moved = False
        while budget is None or made < budget:
            src = None
            while tops:
                _, _, be, stamp = tops[0]
                if stamp != level[be] or be in stuck:
                    pop(tops)
                    continue
                src = be
                break
            if src is None:
                break
            key, dst = find(src)
            if key is None:
                if dst < 0:
                    break
                stuck.add(src)
                continue
            layout.apply(key, src, dst)
            if group_counts is not None:
                counts = group_counts[key[3][0]]
                counts[src] -= 1
                counts[dst] += 1
            lv = level[src] = level[src] - key[0]
            r = lv if by_level else rank(lv, target[src])
            push(tops, (-r, -prefer.get(src, 0), src, lv))
            push(bottoms, (r, prefer.get(src, 0), src, lv))
            lv = level[dst] = level[dst] + key[0]
            r = lv if by_level else rank(lv, target[dst])
            push(tops, (-r, -prefer.get(dst, 0), dst, lv))
            push(bottoms, (r, prefer.get(dst, 0), dst, lv))
            made += 1
            moved = True
        if not stuck or not moved or (budget is not None and made >= budget):
            return made
        for be in stuck:
            r = level[be] if by_level else rank(level[be], target[be])
            push(tops, (-r, -prefer.get(be, 0), be, level[be]))


class _Balancer:
    """One call's fixed inputs: the strategy, the backends and their capacities, and every unit's
    sort key (computed once, shared by the per-group and the cross-group passes)."""

    def __init__(self, strategy: BalanceStrategy, by_id: dict[int, BackendSlot], threshold: float) -> None:
        self.strategy = strategy
        self.objective = strategy.objective
        self.threshold = threshold
        self.by_id = by_id
        self.eligible = sorted(be for be, slot in self.by_id.items() if slot.available)
        if not self.eligible:
            raise PlacementError("no backend is available: bring one up before balancing")
        self.host_of = {be: slot.host for be, slot in self.by_id.items()}
        self.keys: dict[int, list[_Key]] = {}  # group id → its buckets' keys, by seq
        self.shown: dict[int, int | None] = {}
        caps = {}
        for be in self.eligible:
            cap = strategy.capacity(self.by_id[be]) if callable(strategy.capacity) else strategy.capacity
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 0):
                raise PlacementError(
                    f"strategy {strategy.name!r} gave {self.by_id[be].label} the capacity {cap!r}: "
                    f"a capacity must be a number > 0, or None when unknown"
                )
            caps[be] = cap
        # An unknown capacity counts as the median of the known ones, so it neither hoards nor
        # starves; all unknown means all equal.
        known = [cap for cap in caps.values() if cap is not None]
        default = statistics.median(known) if known else 1
        self.caps = {be: default if cap is None else cap for be, cap in caps.items()}
        self.cap_sum = sum(self.caps.values())
        self.equal = len(set(self.caps.values())) == 1

    def add(self, group: int, shown: int | None, buckets: int, bucket_bytes: Mapping[int, int] | None) -> None:
        """Key the buckets of one group; ``shown`` is the group id a strategy sees in a Bucket."""
        self.shown[group] = shown
        sizes = [0] * buckets
        if bucket_bytes:
            for seq in range(buckets):
                size = bucket_bytes.get(seq, 0)
                if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                    raise PlacementError(f"bucket_bytes[{seq}] of group {group} must be an int >= 0, got {size!r}")
                sizes[seq] = size
        cost_of = self.strategy.cost
        if callable(cost_of):
            costs = [cost_of(_new_bucket(Bucket, (shown, seq, size))) for seq, size in enumerate(sizes)]
        else:
            costs = [cost_of] * buckets
        if not _NUMBERS.issuperset(map(type, costs)) or (costs and not min(costs) >= 0) or sum(costs) != sum(costs):
            for seq, cost in enumerate(costs):
                if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not cost >= 0:
                    raise PlacementError(
                        f"strategy {self.strategy.name!r} gave bucket {seq} of group {group} the cost {cost!r}: "
                        f"a cost must be a number >= 0"
                    )
        self.keys[group] = [
            (cost, size, _scatter(group, seq), (group, seq)) for seq, (cost, size) in enumerate(zip(costs, sizes))
        ]

    def bucket(self, unit: _Unit) -> Bucket:
        return _new_bucket(Bucket, (self.shown[unit[0]], unit[1], self.keys[unit[0]][unit[1]][1]))

    def levels(self, maps: Mapping[int, Sequence[Sequence[int]]], base: Mapping[int, float]) -> dict[int, float]:
        """Summed cost per available backend, on top of ``base``."""
        level = {be: base.get(be, 0) for be in self.eligible} if base else dict.fromkeys(self.eligible, 0)
        for group, bucket_map in maps.items():
            for key, row in zip(self.keys[group], bucket_map):
                cost = key[0]
                for be in row:
                    level[be] += cost
        return level

    def targets(self, total: float) -> dict[int, float]:
        """The total split in proportion to capacity."""
        caps, cap_sum = self.caps, self.cap_sum
        if self.equal:
            return dict.fromkeys(caps, total * caps[self.eligible[0]] / cap_sum)
        return {be: total * cap / cap_sum for be, cap in caps.items()}

    def worth(self, level: Mapping[int, float]) -> bool:
        """Could any move gain? Asked of the extreme ranks only, so a group that is already even
        costs no more than a pass over its levels (with equal capacities rank follows level)."""
        total = sum(level.values())
        if total <= 0:
            return False
        objective = self.objective
        floor = objective.floor(self.threshold, total, len(level))
        if self.equal:
            share = total * self.caps[self.eligible[0]] / self.cap_sum
            return objective.opens(max(level.values()), share, min(level.values()), share, floor)
        target = self.targets(total)
        ranked = [(objective.rank(level[be], target[be]), be) for be in level]
        low, top = min(ranked)[1], max(ranked)[1]
        return objective.opens(level[top], target[top], level[low], target[low], floor)

    def run(
        self,
        maps: Mapping[int, Sequence[Sequence[int]]],
        level: dict[int, float],
        prefer: Mapping[int, float],
        budget: int | None,
        group_counts: dict[int, Counter[int]] | None = None,
    ) -> _Layout:
        """Even out ``level`` (updated in place) by moving buckets of ``maps``; return the layout
        holding the new rows and the moves."""
        layout = _Layout(maps, self)
        total = sum(level.values())
        if total > 0 and budget != 0:
            target = self.targets(total)
            floor = self.objective.floor(self.threshold, total, len(level))
            _even_out(layout, self.objective, level, target, prefer, floor, budget, group_counts, self.equal)
        return layout


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _check_options(
    strategy: str | BalanceStrategy, bucket_bytes: object, threshold: float, max_moves: int | None
) -> BalanceStrategy:
    return _check_numbers(resolve_strategy(strategy), bucket_bytes, threshold, max_moves)


def _check_numbers(chosen: BalanceStrategy, bucket_bytes: object, threshold: float,
                   max_moves: int | None) -> BalanceStrategy:
    if chosen.needs_bytes and bucket_bytes is None:
        raise PlacementError(
            f"strategy {chosen.name!r} needs bucket_bytes (bytes of one replica of each bucket, summed over "
            f"the group's tables); pass them, or use strategy 'count'"
        )
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or threshold < 0:
        raise PlacementError(f"threshold must be a fraction >= 0 (e.g. 0.1 for 10%), got {threshold!r}")
    bad_int = isinstance(max_moves, bool) or not isinstance(max_moves, int)
    if max_moves is not None and (bad_int or max_moves < 0):
        raise PlacementError(f"max_moves must be an int >= 0 or None for no limit, got {max_moves!r}")
    return chosen


def balance(
    bucket_map: Sequence[Sequence[int]],
    backends: Sequence[BackendSlot],
    *,
    strategy: str | BalanceStrategy = "count",
    bucket_bytes: Mapping[int, int] | None = None,
    load: Mapping[int, int] | None = None,
    threshold: float = 0.0,
    max_moves: int | None = None,
) -> tuple[BucketMap, list[Move]]:
    """Balance one group; return the new map and the moves that lead there, in order.

    ``strategy`` is a name in ``STRATEGIES`` or a :class:`BalanceStrategy`.

    ``count``: moves replicas from the fullest to the emptiest available backend until slots per
    backend differ by at most one (or the host rule forbids every further move). A new empty
    backend receives ``replicas*buckets/backends`` slots, rounded either way. Ties go to moves
    that also even out ``load`` (slots of other groups per backend), then to the fewest bytes
    (``bucket_bytes``). With one backend per host the number of moves is the minimum: the sum over
    backends of what they hold above their final ``floor``/``ceil`` share (see :class:`SumOfSquares`).

    ``size``: moves bytes toward ``total * cap_i / sum(cap)``, counting ``load`` (bytes of other
    groups) on each backend, so one group can make room on a full disk. See
    :class:`SumOfDistances` for what is guaranteed.

    ``threshold`` skips moves that gain little: a count move needs a gap of at least
    ``threshold * average slots`` between source and destination, a size move must shrink the
    imbalance by at least ``threshold * average target bytes``. ``max_moves`` caps the plan, so a
    balance job can proceed in rounds; each round is itself a valid prefix.
    """
    chosen = _check_options(strategy, bucket_bytes, threshold, max_moves)
    call = _Balancer(chosen, index_backends(backends), threshold)
    check_rows(bucket_map)
    check_all_available(bucket_map, call.by_id)
    return _balance_one(call, bucket_map, bucket_bytes, load, max_moves)


def _balance_one(call: _Balancer, bucket_map: Sequence[Sequence[int]], bucket_bytes: Mapping[int, int] | None,
                 load: Mapping[int, float] | None, max_moves: int | None) -> tuple[BucketMap, list[Move]]:
    """:func:`balance` once its input is checked."""
    per_group = call.strategy.per_group
    load = load or {}
    call.add(0, None, len(bucket_map), bucket_bytes)
    maps = {0: bucket_map}
    level = call.levels(maps, {} if per_group else load)
    layout = call.run(maps, level, load if per_group else {}, max_moves)
    return layout.bucket_map(0, len(bucket_map)), layout.moves_by_group().get(0, [])


def balance_all(
    groups: Mapping[int, Sequence[Sequence[int]]],
    backends: Sequence[BackendSlot],
    *,
    strategy: str | BalanceStrategy = "count",
    bucket_bytes: Mapping[int, Mapping[int, int]] | None = None,
    load: Mapping[int, int] | None = None,
    threshold: float = 0.0,
    max_moves: int | None = None,
) -> tuple[dict[int, BucketMap], dict[int, list[Move]]]:
    """Balance every group, then the cluster as a whole; return new maps and moves per group id.

    A ``per_group`` strategy (``count``) runs two passes:

    1. each group on its own (as :func:`balance`), in group-id order, preferring moves that also
       even out the slots the other groups already put on each backend;
    2. across groups: buckets are moved from the backend with the highest total to the one with
       the lowest, each move inside one group and only where the source holds more slots of that
       group than the destination. Such a move keeps every group's own spread, and some group
       always allows one between two backends whose totals differ, so with one backend per host
       (and no outside ``load`` too big to absorb) every group ends within one slot per backend
       and the totals end within one slot too, with the minimum number of pass-2 moves.

    Any other strategy (``size``) pools the buckets of all groups and balances total bytes against
    capacity (a disk does not care which group filled it); each move is still one bucket of one
    group, and ``bucket_bytes`` maps group id → bucket seq → bytes of one replica.

    ``load`` is counted on top of the groups given (slots or bytes of groups not passed in);
    ``threshold`` and ``max_moves`` mean what they mean for :func:`balance`, ``max_moves`` over
    all groups together.
    """
    chosen = _check_options(strategy, bucket_bytes, threshold, max_moves)
    call = _Balancer(chosen, index_backends(backends), threshold)
    for group, bucket_map in groups.items():
        if isinstance(group, bool) or not isinstance(group, int):
            raise PlacementError(f"group ids must be ints, got {group!r}")
        check_rows(bucket_map, f"group {group}")
        check_all_available(bucket_map, call.by_id, f"group {group}")
    return _balance_all(call, groups, bucket_bytes, load, max_moves)


def _balance_all(call: _Balancer, groups: Mapping[int, Sequence[Sequence[int]]],
                 bucket_bytes: Mapping[int, Mapping[int, int]] | None, load: Mapping[int, float] | None,
                 max_moves: int | None) -> tuple[dict[int, BucketMap], dict[int, list[Move]]]:
    """:func:`balance_all` once its input is checked."""
    load = load or {}
    order = sorted(groups)
    maps: dict[int, BucketMap] = {g: [list(row) for row in groups[g]] for g in order}
    moves: dict[int, list[Move]] = {g: [] for g in order}
    for g in order:
        call.add(g, g, len(maps[g]), (bucket_bytes or {}).get(g))

    def record(layout: _Layout) -> None:
        made = layout.moves_by_group()
        for g in made:
            maps[g] = layout.bucket_map(g, len(maps[g]))
            moves[g].extend(made[g])

    if not call.strategy.per_group:
        level = call.levels(maps, load)
        if call.worth(level):
            record(call.run(maps, level, {}, max_moves))
        return maps, moves

    budget = max_moves
    totals = call.levels(maps, load)

    # Pass 1: each group on its own.
    for g in order:
        if budget == 0:
            break
        level = call.levels({g: maps[g]}, {})
        if not call.worth(level):
            continue
        others = {be: totals[be] - level[be] for be in call.eligible}
        layout = call.run({g: maps[g]}, level, others, budget)
        if budget is not None:
            budget -= len(layout.moves)
        record(layout)
        for be in call.eligible:
            totals[be] = others[be] + level[be]

    # Pass 2: across groups.
    if budget != 0 and call.worth(totals):
        group_counts = {g: Counter(be for row in maps[g] for be in row) for g in order}
        record(call.run(maps, totals, {}, budget, group_counts))
    return maps, moves


def balance_groups(
    groups: Mapping[int, Sequence[Sequence[int]]],
    backends: Sequence[BackendSlot],
    *,
    strategy: BalanceStrategy,
    bucket_bytes: Mapping[int, Mapping[int, int]],
    load: Mapping[int, float] | None = None,
    threshold: float = 0.0,
    cross_group: bool = True,
) -> dict[int, BucketMap]:
    """The new map of every group, in one call: with ``cross_group`` and several groups as
    :func:`balance_all` makes them; otherwise each group as :func:`balance` makes it, in the order
    given, with ``load`` plus what the other groups' maps hold at that point (the ones before it
    already balanced) as its load. One call checks the strategy, the options and every map once,
    before anything is moved, so a caller that plans several groups hands them over together.
    ``strategy`` is the registry's object (:func:`resolve_strategy`): the caller resolved the name
    once, where an unknown one is refused whether or not anything is balanced."""
    chosen = _check_numbers(strategy, bucket_bytes, threshold, None)
    cross = cross_group and len(groups) > 1
    by_id = check_maps(groups, backends, named=cross)
    if cross:
        return _balance_all(_Balancer(chosen, by_id, threshold), groups, bucket_bytes, load, None)[0]
    maps = {g: [list(row) for row in bucket_map] for g, bucket_map in groups.items()}
    cost = chosen.cost
    for g in maps:
        others = Counter(load or {})
        for r, bucket_map in maps.items():
            sizes = bucket_bytes.get(r) or {}
            for seq, row in enumerate(bucket_map if r != g else ()):
                weight = cost(_new_bucket(Bucket, (r, seq, sizes.get(seq, 0)))) if callable(cost) else cost
                for be in row:
                    others[be] += weight
        maps[g] = _balance_one(_Balancer(chosen, by_id, threshold), maps[g], bucket_bytes.get(g), others, None)[0]
    return maps
