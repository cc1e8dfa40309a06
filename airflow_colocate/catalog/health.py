"""Backend health and group stability: probes, decommission progress, the stability check, the
placement snapshot the balancer plans from, verification results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, func, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.rows import DEFAULT_DB, backend_row, group_row, group_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.catalog.stability import SOURCES, find_problems, mark_bad, record_check
from airflow_colocate.catalog.summary import VISIBLE
from airflow_colocate.model.views import (
    DEFAULT_RELOCATE_DELAY,
    BackendHealth,
    GroupHealth,
    Reason,
    SampledReplica,
    VerifyNeed,
    is_unavailable,
    split_reason,
)
from airflow_colocate.core.errors import NotFound
from airflow_colocate.core.times import utc


def _health(b: m.Backend, now: datetime, delay: timedelta) -> BackendHealth:
    reason, source = split_reason(b.state_reason)
    return BackendHealth(id=b.id, name=b.name, root_uri=b.root_uri, host=b.host, capacity_bytes=b.capacity_bytes,
                         state=b.state, state_since=utc(b.state_since), last_heartbeat=utc(b.last_heartbeat),
                         state_reason=reason, reason_source=source,
                         unavailable=is_unavailable(b.state, b.state_since, now, delay),
                         last_probe_at=utc(b.last_probe_at), last_probe_ok=b.last_probe_ok,
                         last_probe_detail=b.last_probe_detail)


class Health:
    """Backend health and group stability, read and recorded in the catalog's transactions."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def backends(self, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> list[BackendHealth]:
        def run(s: Session) -> list[BackendHealth]:
            now = self.db.now()
            return [_health(b, now, relocate_delay) for b in s.scalars(select(m.Backend).order_by(m.Backend.id))]

        return self.db.tx(run)

    def record_probe(self, ref: int | str, ok: bool, error: str | None = None, *,
                     relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> BackendHealth:
        """Record one heartbeat probe. A success refreshes ``last_heartbeat`` and brings a backend the
        probe had marked down back to alive; a failure marks an alive backend down (its
        ``state_since`` is then the down-since time). A backend an operator marked down stays down
        until ``mark-up``; decommissioning backends keep their state. Whatever the state, the
        probe's own finding is kept apart (``last_probe_at/ok/detail``), so "down (admin), but
        reachable" can be told from "down, unreachable"."""
        return self.record_probes([(ref, ok, error)], relocate_delay=relocate_delay)[0]

    def record_probes(self, outcomes: Sequence[tuple[int | str, bool, str | None]], *,
                      relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> list[BackendHealth]:
        """:meth:`record_probe` for each (backend, ok, error) of one probe pass, in one transaction
        (one commit, not one per backend)."""
        def run(s: Session) -> list[BackendHealth]:
            return [one(s, ref, ok, error) for ref, ok, error in outcomes]

        def one(s: Session, ref: int | str, ok: bool, error: str | None) -> BackendHealth:
            row = backend_row(s, ref)
            now = self.db.now()
            row.last_probe_at, row.last_probe_ok = now, bool(ok)
            row.last_probe_detail = ("heartbeat ok" if ok else (error or "heartbeat failed"))[:1000]
            if ok:
                row.last_heartbeat = now
                if row.state == "down" and (row.state_reason or "").startswith("probe"):
                    self.db.event(s, "backend.state", row.name, id=row.id, old="down", new="alive", reason="probe: heartbeat ok")
                    row.state, row.state_since, row.state_reason = "alive", now, None
            elif row.state == "alive":
                why = f"probe: {error or 'heartbeat failed'}"[:1000]
                self.db.event(s, "backend.state", row.name, id=row.id, old="alive", new="down", reason=why)
                row.state, row.state_since, row.state_reason = "down", now, why
            return _health(row, now, relocate_delay)

        return self.db.tx(run)

    def sample_replicas(self, backend_id: int, limit: int) -> list[SampledReplica]:
        """The next ``limit`` verified replicas on a backend, rotating by replica id from where the
        last probe stopped (``backends.sample_cursor``), so repeated probes cover every replica
        without a full verify and each probe costs O(limit), not O(history)."""
        if limit <= 0:
            return []

        def run(s: Session) -> list[SampledReplica]:
            row = s.get(m.Backend, backend_id)
            if row is None:
                return []
            R = m.Replica

            def take(after: int, n: int):
                q = (select(R, m.Partition.value, m.Table.name)
                     .join(m.Partition, m.Partition.id == R.partition_id).join(m.Table, m.Table.id == R.table_id)
                     .where(R.backend_id == backend_id, R.state == "verified", R.id > after).order_by(R.id).limit(n))
                return list(s.execute(q))

            got = take(row.sample_cursor or 0, limit)
            if len(got) < limit and row.sample_cursor:  # wrap around to the oldest replicas
                seen = {r.id for r, _, _ in got}
                got += [x for x in take(0, limit - len(got)) if x[0].id not in seen]
            if got:
                row.sample_cursor = got[-1][0].id
            return [SampledReplica(replica_id=r.id, table=name, partition=value, bucket_seq=r.bucket_seq,
                                   backend_id=r.backend_id, path=r.path, bytes=r.bytes,
                                   files=[tuple(f) for f in r.files] if r.files is not None else None)
                    for r, value, name in got]

        return self.db.tx(run)

    def finish_decommissions(self) -> list[str]:
        """Decommissioning backends that no bucket map names and that hold no replica any more
        become ``decommissioned`` (then ``colocate backend remove`` may delete them)."""
        def run(s: Session) -> list[str]:
            used = {be for ids in s.scalars(select(m.BucketMap.backend_ids)) for be in ids}
            done = []
            for b in s.scalars(select(m.Backend).where(m.Backend.state == "decommissioning").order_by(m.Backend.id)):
                holding = s.scalar(select(exists().where(m.Replica.backend_id == b.id)))
                if b.id not in used and not holding:
                    self.db.event(s, "backend.state", b.name, id=b.id, old=b.state, new="decommissioned", reason="drained")
                    b.state, b.state_since, b.state_reason = "decommissioned", self.db.now(), "drained"
                    done.append(b.name)
            return done

        return self.db.tx(run)


    def check_group(self, ref: str, *, db: str = DEFAULT_DB) -> GroupHealth:
        """Compute whether the group is stable from its replicas, record the answer and the
        reasons (replacing any manual mark), and return them. When nothing the last computation
        read has changed (the group's generation, map, mapped backends' states, balance job), its
        answer is reused at the cost of a few small queries."""
        def run(s: Session) -> GroupHealth:
            g = group_row(s, ref, db)
            reasons, count, reused = find_problems(self.db, s, g)
            return record_check(self.db, s, g, reasons, count, reused)

        return self.db.tx(run)

    def check_groups(self) -> list[GroupHealth]:
        refs = self.db.tx(lambda s: [group_view(s, g).group_id
                                     for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id))])
        out = []
        for ref in refs:
            try:
                out.append(self.check_group(ref))
            except NotFound:  # removed meanwhile
                continue
        return out

    def group_health(self, ref: str, *, db: str = DEFAULT_DB) -> GroupHealth:
        """The recorded state and reasons of the last check (or manual mark), without checking."""
        def run(s: Session) -> GroupHealth:
            g = group_row(s, ref, db)
            view = group_view(s, g)
            reasons = tuple(Reason(**d) for d in (g.unstable_detail or []))
            if not g.stable and not reasons:
                reasons = (Reason(g.unstable_reason or "marked unstable"),)
            if g.stable:
                reasons = ()
            return GroupHealth(group_id=view.group_id, full_name=view.full_name, stable=bool(g.stable),
                               reasons=reasons, problems=len(reasons), checked_at=utc(g.checked_at) or self.db.now())

        return self.db.tx(run)

    def replicas_to_verify(self, *, groups: Sequence[str] | None = None, limit: int | None = None,
                           db: str = DEFAULT_DB, table_ids: Sequence[int] | None = None) -> list[VerifyNeed]:
        """Verified replicas of the visible versions of group tables (of ``table_ids`` only, if
        given) on alive backends, the ones re-hashed longest ago (or never) first."""
        def run(s: Session) -> list[VerifyNeed]:
            if groups:
                gids = sorted({group_row(s, ref, db).id for ref in groups})
            else:
                gids = list(s.scalars(select(m.ColocateGroup.id)))
            alive = list(s.scalars(select(m.Backend.id).where(m.Backend.state == "alive")))
            q = (select(m.Replica.id, m.Replica.backend_id, m.Replica.path, m.Replica.checksum, m.Replica.bytes,
                        m.Replica.table_id, m.Partition.value, m.Replica.bucket_seq, m.Replica.rows,
                        func.coalesce(m.PartitionVersion.layout_buckets, 0))
                 .join(m.Partition, VISIBLE).join(m.Table, m.Table.id == m.Replica.table_id)
                 .outerjoin(m.PartitionVersion, and_(m.PartitionVersion.partition_id == m.Replica.partition_id,
                                                     m.PartitionVersion.version == m.Replica.version))
                 .where(m.Table.group_id.in_(gids), m.Table.state == "normal", m.Replica.state == "verified",
                        m.Replica.backend_id.in_(alive))
                 .order_by(m.Replica.verified_at.asc().nulls_first(), m.Replica.id))
            if table_ids is not None:
                q = q.where(m.Replica.table_id.in_(list(table_ids)))
            if limit is not None:
                q = q.limit(limit)
            return [VerifyNeed(*row) for row in s.execute(q)]

        return self.db.tx(run)

    def record_verify(self, results: Iterable) -> list[str]:
        """Apply ``VerifyResult``s: a replica whose files no longer hash to its checksum (or are
        gone) is ``bad`` (lost: the next balance repairs it from a good copy) and its group
        unstable. Returns the paths found bad."""
        results = list(results)

        def run(s: Session) -> list[str]:
            now = self.db.now()
            rows = [(res, s.get(m.Replica, res.replica_id)) for res in results]
            rows = [(res, r) for res, r in rows if r is not None and r.state == "verified"]
            for res, r in rows:
                if res.ok:
                    r.verified_at = now
            return mark_bad(self.db, s, [(r, res.error or "checksum mismatch",
                                       f"replica {r.path} failed its checksum: {res.error or 'mismatch'}")
                                      for res, r in rows if not res.ok])

        return self.db.tx(run)

    def mark_replicas_bad(self, items: Iterable) -> list[str]:
        """Record replicas a read found not to hold exactly their recorded files
        (:class:`~airflow_colocate.core.contract.BadReplica`: replica id, path, reason) as
        ``bad``, their groups unstable with the reason. A replica no longer verified, or whose
        row now has another path, is left alone. Returns the paths marked bad."""
        items = list(items)

        def run(s: Session) -> list[str]:
            marks = []
            for item in items:
                r = s.get(m.Replica, item.replica_id)
                if r is None or r.path != item.path:
                    continue
                where = f"{item.table}/{item.partition} bucket {item.bucket_seq}"
                source = "" if item.reason.startswith(SOURCES) else "read check: "  # who found it
                marks.append((r, f"{source}{item.reason}",
                              f"replica {r.path} ({where}) does not hold the files the catalog recorded: {item.reason}"))
            return mark_bad(self.db, s, marks)

        return self.db.tx(run)
