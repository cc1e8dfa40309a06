"""Backend health and group stability: probes, decommission progress, the stability check and its reasons, the placement snapshot, verification."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.views import (
    ACTIVE,
    BALANCE_KINDS,
    DEFAULT_RELOCATE_DELAY,
    MAX_REASONS,
    BackendHealth,
    ClusterSnapshot,
    GroupHealth,
    GroupSnapshot,
    Reason,
    VerifyNeed,
    is_unavailable,
    summary,
)
from airflow_colocate.core.errors import (
    NotFound,
)
from airflow_colocate.core.times import utc


@dataclass
class _Scan:
    """The visible replicas of one group: every (live table, committed partition) and, per
    (partition id, bucket seq), the replica rows of the visible version by backend id."""

    group: m.ColocateGroup
    labels: dict[int, str]  # table id -> db.table
    tables: dict[int, m.Table]
    parts: list[tuple[m.Table, m.Partition]]
    by_bucket: dict[tuple[int, int], dict[int, m.Replica]] = field(default_factory=dict)



class HealthMixin:
    """Backend health and group stability: probes, decommission progress, the stability check and its reasons, the placement snapshot, verification."""

    def _health(self, b: m.Backend, now: datetime, delay: timedelta) -> BackendHealth:
        return BackendHealth(id=b.id, name=b.name, root_uri=b.root_uri, host=b.host, capacity_bytes=b.capacity_bytes,
                             state=b.state, state_since=utc(b.state_since), last_heartbeat=utc(b.last_heartbeat),
                             state_reason=b.state_reason,
                             unavailable=is_unavailable(b.state, b.state_since, now, delay))

    def backend_health(self, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> list[BackendHealth]:
        def run(s: Session) -> list[BackendHealth]:
            now = self.now()
            return [self._health(b, now, relocate_delay) for b in s.scalars(select(m.Backend).order_by(m.Backend.id))]

        return self._tx(run)

    def record_probe(self, ref: int | str, ok: bool, error: str | None = None, *,
                     relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> BackendHealth:
        """Record one heartbeat probe. A success refreshes ``last_heartbeat`` and brings a backend the
        probe had marked down back to alive; a failure marks an alive backend down (its
        ``state_since`` is then the down-since time). A backend an operator marked down stays down
        until ``mark-up``; decommissioning backends keep their state."""
        def run(s: Session) -> BackendHealth:
            row = self._backend(s, ref)
            now = self.now()
            if ok:
                row.last_heartbeat = now
                if row.state == "down" and (row.state_reason or "").startswith("probe"):
                    self._event(s, "backend.state", row.name, id=row.id, old="down", new="alive", reason="probe: heartbeat ok")
                    row.state, row.state_since, row.state_reason = "alive", now, None
            elif row.state == "alive":
                why = f"probe: {error or 'heartbeat failed'}"[:1000]
                self._event(s, "backend.state", row.name, id=row.id, old="alive", new="down", reason=why)
                row.state, row.state_since, row.state_reason = "down", now, why
            return self._health(row, now, relocate_delay)

        return self._tx(run)

    def finish_decommissions(self) -> list[str]:
        """Decommissioning backends that no bucket map names and that hold no replica any more
        become ``decommissioned`` (then ``colocate backend remove`` may delete them)."""
        def run(s: Session) -> list[str]:
            used = {be for ids in s.scalars(select(m.BucketMap.backend_ids)) for be in ids}
            holding = set(s.scalars(select(m.Replica.backend_id).distinct()))
            done = []
            for b in s.scalars(select(m.Backend).where(m.Backend.state == "decommissioning").order_by(m.Backend.id)):
                if b.id not in used and b.id not in holding:
                    self._event(s, "backend.state", b.name, id=b.id, old=b.state, new="decommissioned", reason="drained")
                    b.state, b.state_since, b.state_reason = "decommissioned", self.now(), "drained"
                    done.append(b.name)
            return done

        return self._tx(run)

    def _scan(self, s: Session, g: m.ColocateGroup) -> _Scan:
        tables = {t.id: t for t in s.scalars(select(m.Table).where(m.Table.group_id == g.id, m.Table.state == "normal")
                                             .order_by(m.Table.id))}
        db_names = {d.id: d.name for d in s.scalars(select(m.Database))}
        labels = {t.id: f"{db_names.get(t.db_id, '?')}.{t.name}" for t in tables.values()}
        parts: list[tuple[m.Table, m.Partition]] = []
        if tables:
            q = (select(m.Partition).where(m.Partition.table_id.in_(list(tables)), m.Partition.visible_version > 0)
                 .order_by(m.Partition.table_id, m.Partition.value))
            parts = [(tables[p.table_id], p) for p in s.scalars(q)]
        scan = _Scan(group=g, labels=labels, tables=tables, parts=parts)
        visible = {p.id: p.visible_version for _, p in parts}
        ids = list(visible)
        for i in range(0, len(ids), 500):
            for r in s.scalars(select(m.Replica).where(m.Replica.partition_id.in_(ids[i:i + 500]))):
                if r.version == visible[r.partition_id]:
                    scan.by_bucket.setdefault((r.partition_id, r.bucket_seq), {})[r.backend_id] = r
        return scan

    @staticmethod
    def _map(s: Session, grp_id: int) -> list[list[int]]:
        rows = s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == grp_id).order_by(m.BucketMap.bucket_seq))
        return [list(r.backend_ids) for r in rows]

    def _active_job(self, s: Session, grp_id: int, exclude: int | None = None) -> m.Job | None:
        q = (select(m.Job).where(m.Job.group_id == grp_id, m.Job.kind.in_(BALANCE_KINDS), m.Job.state == ACTIVE)
             .order_by(m.Job.id))
        for job in s.scalars(q):
            if job.id != exclude:
                return job
        return None

    def _problems(self, s: Session, g: m.ColocateGroup, *, exclude_job: int | None = None,
                  scan: _Scan | None = None) -> tuple[list[Reason], int]:
        self.now()
        reasons: list[Reason] = []
        count = 0

        def add(reason: Reason) -> None:
            nonlocal count
            count += 1
            if len(reasons) < MAX_REASONS:
                reasons.append(reason)

        job = self._active_job(s, g.id, exclude_job)
        if job is not None:
            add(Reason(f"balance job {job.id} ({job.kind}, step {job.progress.get('step', 'planned')}) is changing the group"))
        bucket_map = self._map(s, g.id)
        backends = {b.id: b for b in s.scalars(select(m.Backend))}
        seqs_of: dict[int, list[int]] = defaultdict(list)
        for seq, row in enumerate(bucket_map):
            for be in row:
                seqs_of[be].append(seq)
        for be in sorted(seqs_of):
            b = backends.get(be)
            if b is None:
                add(Reason(f"bucket map names backend id {be}, which does not exist: relocate the group"))
            elif b.state != "alive":
                since = utc(b.state_since).isoformat(timespec="seconds")
                seqs = seqs_of[be]
                shown = ", ".join(map(str, seqs[:8])) + (", ..." if len(seqs) > 8 else "")
                add(Reason(f"backend {b.name} is {b.state} since {since} ({b.state_reason or 'no reason given'}): "
                           f"bucket seqs {shown} are not on an alive backend", backend=b.name))
        scan = scan or self._scan(s, g)
        for t, p in scan.parts:
            label = scan.labels[t.id]
            for seq in range(min(p.bucket_num, len(bucket_map))):
                have = scan.by_bucket.get((p.id, seq), {})
                for be in bucket_map[seq]:
                    b = backends.get(be)
                    if b is None or b.state != "alive":
                        continue  # reported once per backend above
                    r = have.get(be)
                    if r is not None and r.state == "verified":
                        continue
                    problem = ("no verified replica" if r is None else
                               "replica failed its checksum (bad)" if r.state == "bad" else f"replica is {r.state}")
                    add(Reason(problem, table=label, partition=p.value, version=p.visible_version, bucket=seq,
                               backend=b.name))
        return reasons, count

    def _record_check(self, s: Session, g: m.ColocateGroup, reasons: list[Reason], count: int) -> GroupHealth:
        now = self.now()
        stable = count == 0
        text = summary(reasons, count)
        changed = bool(g.stable) != stable or (g.unstable_reason or None) != text
        if changed:
            self._event(s, "group.check", self._group_view(s, g).full_name, stable=stable, reason=text,
                        previous_stable=bool(g.stable), previous_reason=g.unstable_reason)
            if bool(g.stable) != stable:
                g.version += 1
        g.stable, g.unstable_reason = stable, text
        g.unstable_detail = [asdict(r) for r in reasons] or None
        g.checked_at = now
        view = self._group_view(s, g)
        return GroupHealth(group_id=view.group_id, full_name=view.full_name, stable=stable, reasons=tuple(reasons),
                           problems=count, checked_at=now, changed=changed)

    def check_group(self, ref: str, *, db: str = "default") -> GroupHealth:
        """Compute whether the group is stable from its replicas, record the answer and the
        reasons (replacing any manual mark), and return them."""
        def run(s: Session) -> GroupHealth:
            g = self._group(s, ref, db)
            reasons, count = self._problems(s, g)
            return self._record_check(s, g, reasons, count)

        return self._tx(run)

    def check_groups(self) -> list[GroupHealth]:
        refs = [g.group_id for g in self.groups()]
        out = []
        for ref in refs:
            try:
                out.append(self.check_group(ref))
            except NotFound:  # removed meanwhile
                continue
        return out

    def group_health(self, ref: str, *, db: str = "default") -> GroupHealth:
        """The recorded state and reasons of the last check (or manual mark), without checking."""
        def run(s: Session) -> GroupHealth:
            g = self._group(s, ref, db)
            view = self._group_view(s, g)
            reasons = tuple(Reason(**d) for d in (g.unstable_detail or []))
            if not g.stable and not reasons:
                reasons = (Reason(g.unstable_reason or "marked unstable"),)
            if g.stable:
                reasons = ()
            return GroupHealth(group_id=view.group_id, full_name=view.full_name, stable=bool(g.stable),
                               reasons=reasons, problems=len(reasons), checked_at=utc(g.checked_at) or self.now())

        return self._tx(run)

    def placement_snapshot(self, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> ClusterSnapshot:
        """Everything the balance planner reads, in one consistent transaction."""
        def run(s: Session) -> ClusterSnapshot:
            now = self.now()
            backends = tuple(self._health(b, now, relocate_delay) for b in s.scalars(select(m.Backend).order_by(m.Backend.id)))
            alive = {b.id for b in backends if b.alive}
            groups = []
            in_group: set[int] = set()
            for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id)):
                view = self._group_view(s, g)
                bucket_map = self._map(s, g.id)
                scan = self._scan(s, g)
                in_group.update(scan.tables)
                sizes = [0] * g.bucket_num
                repairs = redundant = 0
                for _, p in scan.parts:
                    for seq in range(min(p.bucket_num, len(bucket_map))):
                        have = scan.by_bucket.get((p.id, seq), {})
                        good = [r.bytes for r in have.values() if r.state == "verified"]
                        sizes[seq] += max(good) if good else 0
                        row = bucket_map[seq]
                        repairs += sum(1 for be in row if be in alive and (be not in have or have[be].state != "verified"))
                        if all(be in have and have[be].state == "verified" for be in row):  # droppable now
                            redundant += sum(1 for be, r in have.items() if be not in row and r.state in ("verified", "bad"))
                job = self._active_job(s, g.id)
                groups.append(GroupSnapshot(grp_id=g.id, group_id=view.group_id, full_name=view.full_name,
                                            bucket_num=g.bucket_num, replication_num=g.replication_num,
                                            bucket_map=tuple(tuple(r) for r in bucket_map), bucket_bytes=tuple(sizes),
                                            active_job=job.id if job else None, repairs=repairs, redundant=redundant))
            other: dict[int, int] = defaultdict(int)
            q = (select(m.Replica.backend_id, m.Replica.bytes, m.Replica.table_id, m.Replica.version, m.Partition.visible_version)
                 .join(m.Partition, m.Partition.id == m.Replica.partition_id).where(m.Replica.state == "verified"))
            for be, size, table_id, version, visible in s.execute(q):
                if version == visible and table_id not in in_group:
                    other[be] += size
            flags = {f: False for f in ("disable_colocate_balance", "disable_colocate_relocate", "disable_colocate_join")}
            flags.update({r.name: r.value for r in s.scalars(select(m.Flag))})
            return ClusterSnapshot(now=now, relocate_delay=relocate_delay, backends=backends, groups=tuple(groups),
                                   other_bytes=dict(other), flags=flags)

        return self._tx(run)

    def replicas_to_verify(self, *, groups: Sequence[str] | None = None, limit: int | None = None,
                           db: str = "default") -> list[VerifyNeed]:
        """Verified replicas of the visible versions of group tables on alive backends, the ones
        re-hashed longest ago (or never) first."""
        def run(s: Session) -> list[VerifyNeed]:
            if groups:
                gs = [self._group(s, ref, db) for ref in groups]
            else:
                gs = list(s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id)))
            alive = {b.id for b in s.scalars(select(m.Backend).where(m.Backend.state == "alive"))}
            rows: list[m.Replica] = []
            for g in gs:
                scan = self._scan(s, g)
                rows += [r for have in scan.by_bucket.values() for r in have.values()
                         if r.state == "verified" and r.backend_id in alive]
            epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
            rows.sort(key=lambda r: (utc(r.verified_at) or epoch, r.id))
            if limit is not None:
                rows = rows[:limit]
            return [VerifyNeed(r.id, r.backend_id, r.path, r.checksum, r.bytes) for r in rows]

        return self._tx(run)

    def record_verify(self, results: Iterable) -> list[str]:
        """Apply ``VerifyResult``s: a replica whose files no longer hash to its checksum (or are
        gone) is ``bad`` (lost: the next balance repairs it from a good copy) and its group
        unstable. Returns the paths found bad."""
        results = list(results)

        def run(s: Session) -> list[str]:
            now = self.now()
            bad = []
            for res in results:
                r = s.get(m.Replica, res.replica_id)
                if r is None or r.state != "verified":
                    continue
                if res.ok:
                    r.verified_at = now
                    continue
                r.state = "bad"
                bad.append(r.path)
                self._event(s, "replica.bad", r.path, replica_id=r.id, backend_id=r.backend_id,
                            reason=(res.error or "checksum mismatch")[:2000])
                t = s.get(m.Table, r.table_id)
                g = s.get(m.ColocateGroup, t.group_id) if t is not None and t.group_id is not None else None
                if g is not None:
                    if g.stable:
                        g.version += 1
                    g.stable = False
                    g.unstable_reason = f"replica {r.path} failed its checksum: {res.error or 'mismatch'}"[:2000]
            return bad

        return self._tx(run)

