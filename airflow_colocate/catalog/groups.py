"""Colocation groups: lookup, creation from a parent table, stable flag, the bucket map."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.buckets import lacking_rows, load_buckets
from airflow_colocate.catalog.outlook import GroupOutlook, outlooks
from airflow_colocate.catalog.rows import DEFAULT_DB, group_row, group_view, slot_load
from airflow_colocate.catalog.session import FLAGS, CatalogSession
from airflow_colocate.catalog.split import layout_counts, split_group
from airflow_colocate.catalog.stability import bind_clock
from airflow_colocate.model.reasons import JoinPolicy
from airflow_colocate.model.views import DEFAULT_RELOCATE_DELAY, GroupView
from airflow_colocate.core import naming, validate
from airflow_colocate.core.errors import (
    Conflict,
    InvalidArgument,
)
from airflow_colocate.placement.initial import initial_map
from airflow_colocate.placement.model import BackendSlot


def create_group(db: CatalogSession, s: Session, name: str, db_id: int, dist_types: list[str], bucket_num: int,
                 replication_num: int) -> m.ColocateGroup:
    """A new group whose map is the round robin over alive backends, spread against every other
    group's slots (the parent table's first partition decides the map of the whole group)."""
    backends = list(s.scalars(select(m.Backend).order_by(m.Backend.id)))
    slots = [BackendSlot(id=b.id, host=b.host, capacity_bytes=b.capacity_bytes, available=b.state == "alive")
             for b in backends]
    bucket_map = initial_map(slots, bucket_num, replication_num, load=slot_load(s))
    g = m.ColocateGroup(db_id=None if naming.is_global_group(name) else db_id, name=name,
                        dist_col_types=dist_types, bucket_num=bucket_num, replication_num=replication_num,
                        stable=True, unstable_reason=None, version=1, created_at=db.now())
    s.add(g)
    s.flush()
    for seq, ids in enumerate(bucket_map):
        s.add(m.BucketMap(group_id=g.id, bucket_seq=seq, backend_ids=list(ids)))
    view = group_view(s, g)
    db.event(s, "group.create", view.full_name, group_id=view.group_id, dist_col_types=dist_types,
             bucket_num=bucket_num, replication_num=replication_num, bucket_map=bucket_map)
    return g


def maybe_remove_group(db: CatalogSession, s: Session, group_id: int | None) -> None:
    """A group lives as long as any table (live or recoverable) names it."""
    if group_id is None:
        return
    left = s.scalar(select(func.count()).select_from(m.Table).where(m.Table.group_id == group_id))
    if left == 0:
        g = s.get(m.ColocateGroup, group_id)
        name = group_view(s, g).full_name
        s.execute(delete(m.BucketMap).where(m.BucketMap.group_id == group_id))
        s.execute(delete(m.GroupCheck).where(m.GroupCheck.group_id == group_id))
        s.delete(g)
        db.event(s, "group.remove", name, grp_id=group_id)


def unplaced(s: Session, g: m.ColocateGroup, rows: list[list[int]], backends: dict) -> tuple[int, str]:
    """How many (table/partition, bucket, backend) of ``rows`` have no verified replica of the
    visible version, and the first of them, from the summaries (detail only for the first)."""
    bk = load_buckets(s, g)
    cells = bk.cells(rows)
    lacking = lacking_rows(s, cells, 1)
    if not lacking:
        return 0, ""
    r = lacking[0]
    first = f"{bk.tables[r.table_id].name}/{r.partition} bucket {r.bucket_seq} on backend {backends[r.backend_id].name}"
    return sum(bk.deficit(t, seq, be) for t, seq, _, be in cells), first


class Groups:
    """Colocation groups: lookup, the stable flag, a forced bucket map."""

    def __init__(self, db: CatalogSession):
        self.db = db
        bind_clock(db)  # unstable_since is stamped with the catalog's clock

    def list(self) -> list[GroupView]:
        return self.db.tx(lambda s: [group_view(s, g, with_map=True)
                                   for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id))])

    def get(self, ref: str, *, db: str = DEFAULT_DB) -> GroupView:
        return self.db.tx(lambda s: group_view(s, group_row(s, ref, db), with_map=True))

    def outlook(self, ref: str, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY,
                db: str = DEFAULT_DB) -> GroupOutlook:
        """Since when the group is unstable, when relocation starts, whether joins shuffle now
        (:mod:`.outlook`)."""
        def run(s: Session) -> GroupOutlook:
            g = group_row(s, ref, db)
            return outlooks(s, self.db.now(), relocate_delay, [g.id])[g.id]

        return self.db.tx(run)

    def outlooks(self, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> dict[int, GroupOutlook]:
        """:meth:`outlook` of every group, by group id (``GroupView.grp_id``), in one transaction."""
        return self.db.tx(lambda s: outlooks(s, self.db.now(), relocate_delay))

    def set_stable(self, ref: str, stable: bool, *, reason: str | None = None, db: str = DEFAULT_DB) -> GroupView:
        """Operator override; the next stability check replaces it if the replicas disagree."""
        reason = validate.reason(reason)

        def run(s: Session) -> GroupView:
            g = group_row(s, ref, db)
            g.stable = bool(stable)
            g.unstable_reason = None if stable else (reason or "marked unstable by an operator")
            g.version += 1
            self.db.event(s, "group.mark_stable" if stable else "group.mark_unstable", group_view(s, g).full_name,
                        reason=g.unstable_reason)
            return group_view(s, g, with_map=True)

        return self.db.tx(run)

    def set_join_policy(self, ref: str, policy: str, *, db: str = DEFAULT_DB) -> GroupView:
        """When the group's joins may stay bucketed (``model.reasons.JoinPolicy``), with its event."""
        chosen = JoinPolicy.parse(policy).value

        def run(s: Session) -> GroupView:
            g = group_row(s, ref, db)
            if g.join_policy != chosen:
                self.db.event(s, "group.join_policy", group_view(s, g).full_name, old=g.join_policy, new=chosen)
                g.join_policy = chosen
            return group_view(s, g, with_map=True)

        return self.db.tx(run)

    def split(self, ref: str, factor: int, *, db: str = DEFAULT_DB) -> GroupView:
        """New versions of the group's tables bucket by ``factor`` times its current layout
        (:mod:`.split`); committed versions keep theirs."""
        return self.db.tx(lambda s: split_group(self.db, s, ref, factor, db))

    def layouts(self, ref: str, *, db: str = DEFAULT_DB) -> dict[int, int]:
        """Bucket count -> committed partitions of the group's tables written at it."""
        def run(s: Session) -> dict[int, int]:
            g = group_row(s, ref, db)
            return layout_counts(s, [g.id])[g.id]

        return self.db.tx(run)

    def set_bucket_map(self, ref: str, bucket_map: Sequence[Sequence[int]], *, force: bool = False,
                       db: str = DEFAULT_DB) -> GroupView:
        """Force a group's bucket sequence (the seeds' ``POST /api/colocate/bucketseq``).

        The map must have one entry per bucket and one backend per replica; every backend must
        exist and be alive, and a bucket may not name one backend, or one host, twice. Refused
        while repair or balance could move the map back (``disable_colocate_balance`` and
        ``disable_colocate_relocate`` not both set) or a balance job is changing the group, unless
        ``force``. Replicas are not moved here: if committed data is not where the new map says,
        the group becomes unstable until a repair clones it there.
        """
        if not isinstance(bucket_map, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in bucket_map):
            raise InvalidArgument(f"invalid bucket map {bucket_map!r}: expected a list with one list of backend ids per bucket, e.g. [[1, 2], [2, 3]]")
        rows = [list(r) for r in bucket_map]
        for seq, row in enumerate(rows):
            for be in row:
                if isinstance(be, bool) or not isinstance(be, int):
                    raise InvalidArgument(f"invalid bucket map: bucket {seq} has {be!r}, expected backend ids (integers)")

        def run(s: Session) -> GroupView:
            g = group_row(s, ref, db)
            name = group_view(s, g).full_name
            problems: list[str] = []
            if len(rows) != g.bucket_num:
                problems.append(f"it has {len(rows)} entries, the group has {g.bucket_num} buckets: give one entry per bucket")
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            for seq, row in enumerate(rows):
                if len(row) != g.replication_num:
                    problems.append(f"bucket {seq} lists {len(row)} backends, the group has replication_num "
                                    f"{g.replication_num}: give one backend per replica")
                if len(set(row)) != len(row):
                    twice = sorted({be for be in row if row.count(be) > 1})
                    problems.append(f"bucket {seq} lists backend {twice[0]} twice: each replica of a bucket must be on a different backend")
                for be in dict.fromkeys(row):
                    b = backends.get(be)
                    if b is None:
                        known = ", ".join(f"{x.id} ({x.name})" for x in sorted(backends.values(), key=lambda x: x.id)) or "none"
                        problems.append(f"bucket {seq} names backend {be}, which does not exist (backends: {known})")
                    elif b.state != "alive":
                        problems.append(f"bucket {seq} names backend {be} ({b.name}), which is {b.state}: only alive backends may hold a bucket")
                hosts = [backends[be].host for be in dict.fromkeys(row) if be in backends]
                if len(set(hosts)) != len(hosts):
                    clash = sorted({h for h in hosts if hosts.count(h) > 1})
                    problems.append(f"bucket {seq} puts two replicas on host {clash[0]}: replicas of a bucket need distinct hosts")
            if problems:
                shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more problems" if len(problems) > 8 else "")
                raise InvalidArgument(f"invalid bucket map for group {name}: {shown}")
            flags = {f: False for f in FLAGS}
            flags.update({r.name: r.value for r in s.scalars(select(m.Flag))})
            running = s.scalar(select(m.Job).where(m.Job.group_id == g.id, m.Job.kind.in_(("relocate", "balance", "repair")),
                                                   m.Job.state == "running").order_by(m.Job.id))
            if not force:
                why = []
                unset = [f for f in ("disable_colocate_balance", "disable_colocate_relocate") if not flags[f]]
                if unset:
                    why.append(f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set, so repair and "
                               f"balance would move the map back (set them with 'colocate flag set <flag> true')")
                if running is not None:
                    why.append(f"balance job {running.id} ({running.kind}) is changing the group")
                if why:
                    raise Conflict(f"refusing to force the bucket map of group {name}: " + "; ".join(why) + "; or pass force")
            old = [list(r.backend_ids) for r in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)
                                                           .order_by(m.BucketMap.bucket_seq))]
            missing, first = 0, ""
            if rows != old:
                for r in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)):
                    r.backend_ids = list(rows[r.bucket_seq])
                g.version += 1
                g.generation += 1
                missing, first = unplaced(s, g, rows, backends)
                if missing:
                    g.stable = False
                    g.unstable_reason = (f"bucket map forced by {self.db.actor}: {missing} replicas are not on the backends "
                                         f"the map names (first: {first}); a repair clones them there")[:2000]
            self.db.event(s, "group.set_bucket_map", name, group_id=group_view(s, g).group_id, old_map=old,
                        new_map=rows, changed=rows != old, force=bool(force), flags=flags,
                        running_job=running.id if running is not None else None, unplaced=missing)
            return group_view(s, g, with_map=True)

        return self.db.tx(run)

