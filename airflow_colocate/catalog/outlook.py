"""What happens next to a group, as an on-call engineer asks it: since when it is unstable, when
balance starts relocating the buckets of its down backends, and whether its joins shuffle now.

The relocation time is the balance's own rule (``views.is_unavailable``): a backend that its map
names and that has been down for the relocate delay is replaced by the next balance/repair run;
decommissioning (or a backend id the map names that no longer exists) is replaced at once. Whether
joins shuffle, and why, is ``model.rules.group_join_fallback``, the rule the read planner applies
to every query, asked here with the same facts.

Everything comes from the group, backend, bucket-map and running-job rows: a handful of small
queries, whatever the history.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.core.times import utc
from airflow_colocate.catalog.availability import lost_buckets, unavailable
from airflow_colocate.model.reasons import JoinPolicy
from airflow_colocate.model.rules import group_join_fallback
from airflow_colocate.model.views import ACTIVE, is_unavailable


@dataclass(frozen=True)
class GroupOutlook:
    grp_id: int
    unstable_since: datetime | None  # when ``stable`` last turned false; None while stable
    relocation_starts_at: datetime | None  # earliest down-since + delay of a mapped backend still inside the delay
    relocation_due: bool  # a mapped backend is unavailable now (or a relocate job runs): the next balance moves it
    joins_shuffle: bool  # a join on the group's tables falls back to a shuffle join now
    joins_shuffle_reason: str | None  # the planner's reason, e.g. "group is not stable: ..."
    relocation_backends: tuple[str, ...]  # the mapped backends that are not alive, by name
    relocate_delay_seconds: float
    relocation_disabled: bool = False  # disable_colocate_relocate is set: no balance run relocates
    join_policy: str = "stable"  # model.reasons.JoinPolicy
    remote_buckets: int = 0  # joins stay bucketed (policy "readable") with this many buckets off their map's alive backends

    def to_dict(self) -> dict:
        """The fields the API, the CLI's --json and the page share (one set of names: a client reads the same keys from each)."""
        return {"unstable_since": self.unstable_since, "relocation_starts_at": self.relocation_starts_at,
                "relocation_due": self.relocation_due, "joins_shuffle": self.joins_shuffle,
                "joins_shuffle_reason": self.joins_shuffle_reason,
                "relocation_backends": list(self.relocation_backends),
                "relocate_delay_seconds": self.relocate_delay_seconds, "relocation_disabled": self.relocation_disabled,
                "join_policy": self.join_policy, "remote_buckets": self.remote_buckets}


def outlooks(s: Session, now: datetime, delay: timedelta, grp_ids: list[int] | None = None) -> dict[int, GroupOutlook]:
    """Per group id (every group, or ``grp_ids``): its outlook at ``now`` under the relocate ``delay``."""
    q = select(m.ColocateGroup).order_by(m.ColocateGroup.id)
    if grp_ids is not None:
        q = q.where(m.ColocateGroup.id.in_(grp_ids))
    groups = list(s.scalars(q))
    if not groups:
        return {}
    ids = [g.id for g in groups]
    backends = {b.id: b for b in s.scalars(select(m.Backend))}
    mapped: dict[int, set[int]] = defaultdict(set)
    maps: dict[int, list[tuple[int, ...]]] = defaultdict(list)
    for gid, row in s.execute(select(m.BucketMap.group_id, m.BucketMap.backend_ids).where(m.BucketMap.group_id.in_(ids))):
        mapped[gid].update(row or ())
        maps[gid].append(tuple(row or ()))
    # a finished relocation (its group stable, the marks of what it left to come) is no longer one
    relocating = {gid for gid, progress in s.execute(select(m.Job.group_id, m.Job.progress).where(
        m.Job.group_id.in_(ids), m.Job.kind == "relocate", m.Job.state == ACTIVE))
        if (progress or {}).get("step") != "finished"}
    flags = {f.name: bool(f.value) for f in s.scalars(select(m.Flag))}
    alive = {b.id for b in backends.values() if b.state == "alive"}
    names = {b.id: b.name for b in backends.values()}
    disabled = flags.get("disable_colocate_join", False)
    out = {}
    for g in groups:
        gone = sorted(be for be in mapped[g.id] if be not in backends)
        down = sorted((b for be in mapped[g.id] if (b := backends.get(be)) is not None and b.state != "alive"),
                      key=lambda b: b.id)
        due = bool(gone) or g.id in relocating or any(is_unavailable(b.state, b.state_since, now, delay) for b in down)
        waiting = [utc(b.state_since) + delay for b in down if b.state == "down"]
        starts = None if due or not waiting else min(waiting)
        policy = JoinPolicy.parse(g.join_policy)
        readable = policy is JoinPolicy.READABLE and not disabled
        shuffle = group_join_fallback(disabled=disabled, stable=g.stable, unstable_reason=g.unstable_reason,
                                      mapped=mapped[g.id], alive=alive, names=names, policy=policy,
                                      unreadable=_unreadable(s, g.id) if readable else None)
        remote = (sum(1 for row in maps[g.id] if not any(be in alive for be in row))
                  if readable and shuffle is None else 0)
        out[g.id] = GroupOutlook(
            grp_id=g.id, unstable_since=None if g.stable else utc(g.unstable_since), relocation_starts_at=starts,
            relocation_due=due, joins_shuffle=shuffle is not None, joins_shuffle_reason=shuffle,
            relocation_backends=tuple([b.name for b in down] + [f"id {be}" for be in gone]),
            relocate_delay_seconds=delay.total_seconds(),
            relocation_disabled=bool(down or gone) and flags.get("disable_colocate_relocate", False),
            join_policy=policy.value, remote_buckets=remote)
    return out


def _unreadable(s: Session, grp_id: int) -> str | None:
    """Why a join of this group cannot stay bucketed under the ``readable`` policy: a committed
    partition of one of its tables whose bucket has no verified replica on an alive backend."""
    tables = list(s.scalars(select(m.Table.id).where(m.Table.group_id == grp_id, m.Table.state == "normal")))
    found = unavailable(s, tables, limit=1) if tables else None
    if not found or not found.tables:
        return None
    t = next(iter(found.tables.values()))
    lost = lost_buckets(s, t.table_id, t.partitions[0])
    which = f"bucket {lost[0]}" + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else "") if lost else "a bucket"
    return (f"{t.table}/{t.partitions[0]} {which} has no verified replica on an alive backend "
            f"(only on {', '.join(t.backends)})")


__all__ = ["GroupOutlook", "outlooks"]
