"""Turn a catalog snapshot into balance plans: which bucket replicas move where, and why.

Pure: it reads a :class:`~airflow_colocate.model.views.ClusterSnapshot` and calls the
placement library (:func:`~airflow_colocate.placement.relocate`, :func:`~airflow_colocate.placement.balance`,
:func:`~airflow_colocate.placement.balance_all`); no database, no files, no clock.

Per group, in order:

1. **relocate** (unless ``disable_colocate_relocate``): every map entry on an *unavailable*
   backend (decommissioning, or down longer than the relocate delay) is replaced by the
   least-loaded eligible backend. A backend that is only *transiently* down keeps its entries:
   relocating it now would re-clone everything it holds for a blip.
2. **balance** (unless ``disable_colocate_balance``): groups whose map names alive backends only
   are evened out, bucket seq by bucket seq, by slot count (``count``, the seeds' balancer) or by
   bytes against capacity (``size``); with several groups, across groups too.

A move keeps its index in the bucket's backend list, so each changed index of the map is one
move ``src → dst`` of every table's replica of that bucket.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from airflow_colocate.model.views import ClusterSnapshot, GroupSnapshot
from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement.strategies import resolve_strategy
from airflow_colocate.placement import BackendSlot, relocate
from airflow_colocate.placement.balance import balance_groups


@dataclass(frozen=True)
class PlannedMove:
    bucket_seq: int
    index: int  # position in the bucket's backend list (0 = primary)
    src: int
    dst: int
    bytes: int
    why: str  # relocate | decommission | balance

    def to_dict(self) -> dict:
        return {"bucket_seq": self.bucket_seq, "index": self.index, "src": self.src, "dst": self.dst,
                "bytes": self.bytes, "why": self.why}


@dataclass(frozen=True)
class GroupPlan:
    grp_id: int
    group_id: str
    full_name: str
    old_map: list[list[int]]
    new_map: list[list[int]]
    moves: list[PlannedMove]
    repairs: int  # replicas missing or bad on backends the map keeps: cloned in place
    redundant: int  # replicas on backends the map does not name: dropped once the bucket is whole
    notes: list[str] = field(default_factory=list)
    strategy: str = "count"

    @property
    def kind(self) -> str:
        if any(mv.why != "balance" for mv in self.moves):
            return "relocate"
        return "balance" if self.moves else "repair"

    @property
    def bytes(self) -> int:
        return sum(mv.bytes for mv in self.moves)

    @property
    def needs_job(self) -> bool:
        return bool(self.moves or self.repairs or self.redundant)

    def to_plan(self) -> dict:
        """The JSON the job row keeps (``jobs.plan``)."""
        return {"grp_id": self.grp_id, "group_id": self.group_id, "strategy": self.strategy,
                "old_map": self.old_map, "new_map": self.new_map, "moves": [mv.to_dict() for mv in self.moves],
                "repairs": self.repairs, "redundant": self.redundant, "notes": list(self.notes)}

    def summary(self) -> dict:
        """What users see of a plan (XCom, ``--json``, the API): the job's plan with its group,
        kind and bytes."""
        return dict(self.to_plan(), group=self.full_name, kind=self.kind, bytes=self.bytes)


def _slots(snapshot: ClusterSnapshot) -> list[BackendSlot]:
    return [BackendSlot(id=b.id, host=b.host, capacity_bytes=b.capacity_bytes, available=b.alive)
            for b in snapshot.backends]


def _relocate_group(g: GroupSnapshot, snapshot: ClusterSnapshot, load: Counter) -> tuple[list[list[int]], list[str]]:
    """Replace unavailable entries; keep transiently-down ones (they may come back)."""
    by_id = {b.id: b for b in snapshot.backends}
    old = [list(r) for r in g.bucket_map]
    lost = sorted({be for row in old for be in row if be not in by_id or by_id[be].unavailable})
    if not lost:
        return old, []
    transient = {be for row in old for be in row if be in by_id and by_id[be].transiently_down}
    try:
        new = relocate(old, _slots(snapshot), load)
    except PlacementError as exc:
        return old, [f"cannot relocate: {exc}"]
    notes = []
    hosts = {b.id: b.host for b in snapshot.backends}
    for seq, (before, after) in enumerate(zip(old, new)):
        if not transient.intersection(before):
            continue
        row = [be if be in transient else after[i] for i, be in enumerate(before)]
        if len({hosts.get(be, be) for be in row}) != len(row):
            row = list(before)  # the replacement would share a host with a backend that may come back
            notes.append(f"bucket {seq} waits: its replacement would share a host with a transiently down backend")
        new[seq] = row
    for be in lost:
        b = by_id.get(be)
        why = ("decommissioning" if b and b.state in ("decommissioning", "decommissioned")
               else f"down since {b.state_since.isoformat(timespec='seconds')}" if b else "unknown")
        notes.append(f"relocate backend {b.name if b else be} ({why})")
    return new, notes


def _why(be: int, snapshot: ClusterSnapshot) -> str:
    b = next((x for x in snapshot.backends if x.id == be), None)
    if b is None or (b.unavailable and b.state == "down"):
        return "relocate"
    if b.unavailable:
        return "decommission"
    return "balance"


def plan_balance(snapshot: ClusterSnapshot, *, strategy: str = "count", threshold: float = 0.0,
                 groups: Collection[int] | None = None, cross_group: bool = True,
                 relocate_enabled: bool | None = None, balance_enabled: bool | None = None) -> list[GroupPlan]:
    """One :class:`GroupPlan` per group in scope (``groups``: group ids, default all) that has no
    balance job running. Flags come from the snapshot unless overridden."""
    relocate_on = (not snapshot.flags.get("disable_colocate_relocate")) if relocate_enabled is None else relocate_enabled
    balance_on = (not snapshot.flags.get("disable_colocate_balance")) if balance_enabled is None else balance_enabled
    alive = {b.id for b in snapshot.backends if b.alive}
    scope = [g for g in snapshot.groups if groups is None or g.grp_id in groups]
    busy = {g.grp_id for g in scope if g.active_job is not None}
    maps = {g.grp_id: [list(r) for r in g.bucket_map] for g in snapshot.groups}
    notes: dict[int, list[str]] = {g.grp_id: [] for g in scope}
    for g in scope:
        if g.grp_id in busy:
            notes[g.grp_id].append(f"balance job {g.active_job} is running: it is resumed, not planned again")

    # 1. relocate, counting the slots of every other group as load (updated as groups change).
    for g in scope:
        if g.grp_id in busy:
            continue
        needs = any(be not in alive for row in maps[g.grp_id] for be in row)
        if not needs:
            continue
        if not relocate_on:
            notes[g.grp_id].append("disable_colocate_relocate is set: unavailable backends are not replaced")
            continue
        load = Counter(be for gid, mp in maps.items() if gid != g.grp_id for row in mp for be in row)
        maps[g.grp_id], extra = _relocate_group(g, snapshot, load)
        notes[g.grp_id] += extra

    # 2. balance the groups whose maps name alive backends only. A name the registry does not hold
    # is refused here, whether or not anything is balanced, and placement is handed what it names.
    chosen = resolve_strategy(strategy)
    if balance_on:
        ready = [g for g in scope if g.grp_id not in busy and all(be in alive for row in maps[g.grp_id] for be in row)]
        for g in scope:
            if g.grp_id not in busy and g not in ready:
                notes[g.grp_id].append("not balanced: its map still names a backend that is not alive")
        fixed = [gid for gid in maps if gid not in {g.grp_id for g in ready}]
        slots = _slots(snapshot)
        sizes = {g.grp_id: dict(enumerate(g.bucket_bytes)) for g in snapshot.groups}
        if strategy == "count":
            load = Counter(be for gid in fixed for row in maps[gid] for be in row)
        else:
            load = Counter(snapshot.other_bytes)
            for gid in fixed:
                for seq, row in enumerate(maps[gid]):
                    for be in row:
                        load[be] += sizes[gid].get(seq, 0)
        try:
            maps.update(balance_groups({g.grp_id: maps[g.grp_id] for g in ready}, slots, strategy=chosen,
                                       bucket_bytes={g.grp_id: sizes[g.grp_id] for g in ready}, load=load,
                                       threshold=threshold, cross_group=cross_group))
        except PlacementError as exc:
            for g in ready:
                notes[g.grp_id].append(f"not balanced: {exc}")
    elif scope:
        for g in scope:
            if g.grp_id not in busy:
                notes[g.grp_id].append("disable_colocate_balance is set: not balanced")

    plans = []
    for g in scope:
        if g.grp_id in busy:
            plans.append(GroupPlan(g.grp_id, g.group_id, g.full_name, [list(r) for r in g.bucket_map],
                                   [list(r) for r in g.bucket_map], [], 0, 0, notes[g.grp_id], strategy))
            continue
        old = [list(r) for r in g.bucket_map]
        new = maps[g.grp_id]
        moves = [PlannedMove(seq, i, a, b, g.bucket_bytes[seq] if seq < len(g.bucket_bytes) else 0, _why(a, snapshot))
                 for seq, (ro, rn) in enumerate(zip(old, new)) for i, (a, b) in enumerate(zip(ro, rn)) if a != b]
        plans.append(GroupPlan(g.grp_id, g.group_id, g.full_name, old, [list(r) for r in new], moves, g.repairs,
                               g.redundant, notes[g.grp_id], strategy))
    return plans


__all__ = ["GroupPlan", "PlannedMove", "plan_balance"]
