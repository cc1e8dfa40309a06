"""The catalog's state as numbers a dashboard or an alert rule reads (``/api/colocate/metrics``,
the maintenance DAG's alert): per group, per backend, per balance job kind and state.

Every figure comes from an aggregate the catalog already keeps (the bucket summaries, the group and
backend rows), a ``GROUP BY`` over an index (balance jobs), two index probes (the oldest re-hash,
``ix_replica_checked``), the unavailable partitions (:mod:`.availability`: the summaries, then an
indexed query only for a table whose bucket may have lost its last readable copy) or, for a group
unstable since before 0007 (no ``unstable_since``), its few events: a scrape every 15 s must cost the
same on a 3-year lake as on a new one, so nothing here reads a replica row per partition
(0.5 s at most on bench/bench_catalog.py's 100% catalog; docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.availability import unavailable
from airflow_colocate.catalog.buckets import load_buckets
from airflow_colocate.catalog.rows import group_view, map_of
from airflow_colocate.catalog.split import layout_counts
from airflow_colocate.model.views import BALANCE_KINDS
from airflow_colocate.core.times import utc

# Event kinds that name a group (subject = the group's full name) and say what its stability became.
BECAME_STABLE = ("group.create", "group.mark_stable")
BECAME_UNSTABLE = ("group.mark_unstable", "balance.start")
CHECKED = "group.check"  # detail.stable says which way


@dataclass(frozen=True)
class GroupMetrics:
    group: str  # the full name, dbId_name
    group_id: str  # dbId.grpId
    stable: bool
    reason: str | None
    unstable_since: datetime | None  # None while stable
    bucket_num: int
    under_replicated: int  # bucket seqs with fewer verified replicas on alive backends than replication_num
    bad_replicas: int  # bad replicas of the visible versions of its tables
    layout_buckets: int = 0  # the bucket count new versions are written with (a split's k·bucket_num)
    layouts: tuple[tuple[int, int], ...] = ()  # (bucket count, committed partitions written at it)


@dataclass(frozen=True)
class BackendMetrics:
    name: str
    state: str
    state_since: datetime
    reason: str | None
    bytes: int  # verified bytes of visible versions held there
    capacity_bytes: int | None
    bad_replicas: int
    unavailable_partitions: int = 0  # partitions whose last verified copy of a bucket is here (not alive)


@dataclass(frozen=True)
class TableMetrics:
    table: str  # db.table
    unavailable_partitions: int  # committed partitions a read cannot serve (:mod:`.availability`)


@dataclass(frozen=True)
class JobMetrics:
    kind: str
    state: str
    count: int
    oldest_created: datetime | None
    oldest_updated: datetime | None  # the one that has gone longest without progress


@dataclass(frozen=True)
class CatalogMetrics:
    now: datetime
    groups: tuple[GroupMetrics, ...]
    backends: tuple[BackendMetrics, ...]
    jobs: tuple[JobMetrics, ...]
    oldest_unverified: datetime | None  # the verified replica re-hashed (or written) longest ago
    tables: tuple[TableMetrics, ...] = ()  # every live table


class Metrics:
    """``catalog.metrics``: the catalog's state as a dashboard reads it."""

    def __init__(self, db):
        self.db = db

    def read(self) -> CatalogMetrics:
        """Groups, backends, balance jobs and the oldest re-hash (aggregates only, one transaction)."""
        return self.db.tx(lambda s: collect(s, self.db.now()))


def collect(s: Session, now: datetime) -> CatalogMetrics:
    backends = list(s.scalars(select(m.Backend).order_by(m.Backend.id)))
    alive = {b.id for b in backends if b.state == "alive"}
    per_backend = {be: (int(size or 0), int(bad or 0)) for be, size, bad in s.execute(
        select(m.BucketReplicas.backend_id, func.sum(m.BucketReplicas.bytes), func.sum(m.BucketReplicas.bad))
        .group_by(m.BucketReplicas.backend_id))}
    rows = list(s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id)))
    groups = tuple(_group(s, g, alive) for g in rows)
    # unstable_since is kept by the group row since 0007; a group unstable since before has none.
    recorded = {g.id: utc(g.unstable_since) for g in rows if not g.stable and g.unstable_since is not None}
    since = _unstable_since(s, [g for g, row in zip(groups, rows) if not g.stable and row.id not in recorded])
    groups = tuple(g if g.stable else _with_since(g, recorded.get(row.id) or since.get(g.group))
                   for g, row in zip(groups, rows))
    lost = unavailable(s, limit=0)
    names = s.execute(select(m.Table.id, m.Database.name, m.Table.name).join(m.Database, m.Database.id == m.Table.db_id)
                      .where(m.Table.state == "normal").order_by(m.Database.name, m.Table.name))
    tables = tuple(TableMetrics(f"{db}.{name}", lost.tables[t].count if t in lost.tables else 0) for t, db, name in names)
    jobs = tuple(JobMetrics(kind, state, int(n), utc(created), utc(updated)) for kind, state, n, created, updated in s.execute(
        select(m.Job.kind, m.Job.state, func.count(), func.min(m.Job.created_at), func.min(m.Job.updated_at))
        .where(m.Job.kind.in_(BALANCE_KINDS)).group_by(m.Job.kind, m.Job.state).order_by(m.Job.kind, m.Job.state)))
    return CatalogMetrics(
        now=now, groups=groups,
        backends=tuple(BackendMetrics(b.name, b.state, utc(b.state_since), b.state_reason, per_backend.get(b.id, (0, 0))[0],
                                      b.capacity_bytes, per_backend.get(b.id, (0, 0))[1], lost.by_backend.get(b.id, 0))
                       for b in backends),
        jobs=jobs, oldest_unverified=_oldest_unverified(s), tables=tables)


def _group(s: Session, g: m.ColocateGroup, alive: set[int]) -> GroupMetrics:
    """Under-replicated bucket seqs from the summaries (buckets x backends rows): a seq whose map
    row is short, names a backend that is not alive, or where a table lacks a verified replica of
    a committed partition on a mapped backend."""
    bucket_map = map_of(s, g.id)
    bk = load_buckets(s, g)
    under = 0
    for seq in range(g.bucket_num):
        row = bucket_map[seq] if seq < len(bucket_map) else []
        if (len(row) < g.replication_num or any(be not in alive for be in row)
                or any(bk.deficit(t, seq, be) > 0 for t in bk.tables for be in row)):
            under += 1
    bad = sum(bad for (t, _, _), (_, _, bad) in bk.counts.items() if t in bk.tables)
    view = group_view(s, g)
    return GroupMetrics(group=view.full_name, group_id=view.group_id, stable=bool(g.stable),
                        reason=None if g.stable else (g.unstable_reason or "marked unstable"), unstable_since=None,
                        bucket_num=g.bucket_num, under_replicated=under, bad_replicas=bad,
                        layout_buckets=g.layout_buckets or g.bucket_num,
                        layouts=tuple(sorted(layout_counts(s, [g.id])[g.id].items())))


def _with_since(g: GroupMetrics, since: datetime | None) -> GroupMetrics:
    return GroupMetrics(**{**g.__dict__, "unstable_since": since})


def _unstable_since(s: Session, unstable: list[GroupMetrics]) -> dict[str, datetime | None]:
    """When each unstable group last went from stable to unstable, read from the event log: the
    first event that made it unstable after the last one that made it stable. Only the events of
    the unstable groups are read, newest first, and only until that stable event. A replica found
    bad makes its group unstable without a group event (its event names the replica); the check
    that follows records ``group.check`` with ``previous_stable`` false, so the time is then the
    earliest ``replica.bad`` of the group's tables after the stable event, when there is one."""
    out: dict[str, datetime | None] = {}
    for g in unstable:
        first_unstable: tuple[int, datetime] | None = None
        stable_at_id = 0
        q = (select(m.Event.id, m.Event.ts, m.Event.kind, m.Event.detail)
             .where(m.Event.subject == g.group, m.Event.kind.in_((*BECAME_STABLE, *BECAME_UNSTABLE, CHECKED)))
             .order_by(m.Event.id.desc()))
        for eid, ts, kind, detail in s.execute(q):
            became_stable = kind in BECAME_STABLE or (kind == CHECKED and (detail or {}).get("stable"))
            if became_stable:
                stable_at_id = eid
                break
            first_unstable = (eid, utc(ts))
        bad = _first_bad_after(s, g, stable_at_id)
        if bad is not None and (first_unstable is None or bad[0] < first_unstable[0]):
            first_unstable = bad
        out[g.group] = first_unstable[1] if first_unstable else None
    return out


def _first_bad_after(s: Session, g: GroupMetrics, after_id: int) -> tuple[int, datetime] | None:
    """The first ``replica.bad`` event after ``after_id`` whose replica belongs to the group."""
    grp_id = int(g.group_id.split(".")[1])
    tables = set(s.scalars(select(m.Table.id).where(m.Table.group_id == grp_id)))
    q = (select(m.Event.id, m.Event.ts, m.Event.detail)
         .where(m.Event.id > after_id, m.Event.kind == "replica.bad").order_by(m.Event.id))
    for eid, ts, detail in s.execute(q):
        rid = (detail or {}).get("replica_id")
        table = s.scalar(select(m.Replica.table_id).where(m.Replica.id == rid)) if rid is not None else None
        if table in tables:
            return eid, utc(ts)
    return None


def _oldest_unverified(s: Session) -> datetime | None:
    """The verified replica whose bytes were checked (re-hashed by verify, or written) longest
    ago: the oldest re-hash, or the oldest write never re-hashed, whichever is older. Two probes
    of ``ix_replica_checked`` (never a scan of the replica rows)."""
    R = m.Replica
    rehashed = s.scalar(select(R.verified_at).where(R.state == "verified", R.verified_at.is_not(None))
                        .order_by(R.verified_at).limit(1))
    never = s.scalar(select(R.created_at).where(R.state == "verified", R.verified_at.is_(None))
                     .order_by(R.created_at).limit(1))
    times = [utc(t) for t in (rehashed, never) if t is not None]
    return min(times) if times else None


__all__ = ["BackendMetrics", "CatalogMetrics", "GroupMetrics", "JobMetrics", "TableMetrics", "collect"]
