"""Backend health and group stability: probes, decommission progress, the stability check and its reasons, the placement snapshot, verification."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session, aliased

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.summary import VISIBLE, tracking
from airflow_colocate.catalog.views import (
    ACTIVE,
    SampledReplica,
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
class _Buckets:
    """One group's replicas as counts per (table, bucket seq, backend), read from the summaries:
    what stability, repairs and loads need, without a replica row. ``deficit`` says how many
    committed partitions lack a verified replica in a cell; :meth:`HealthMixin._lacking_rows`
    fetches those partitions only where it is not zero."""

    group: m.ColocateGroup
    tables: dict[int, m.Table]  # live tables of the group, by id ascending
    labels: dict[int, str]  # table id -> db.table
    committed: dict[int, dict[int, int]]  # table id -> {bucket_num: partitions with a visible version}
    counts: dict[tuple[int, int, int], tuple[int, int, int]]  # (table, seq, backend) -> (verified, bytes, bad)
    sizes: dict[tuple[int, int], int] = field(default_factory=dict)  # (table, seq) -> bytes of one replica

    def expected(self, t: int, seq: int) -> int:
        return sum(n for buckets, n in self.committed.get(t, {}).items() if buckets > seq)

    def verified(self, t: int, seq: int, be: int) -> int:
        return self.counts.get((t, seq, be), (0, 0, 0))[0]

    def deficit(self, t: int, seq: int, be: int) -> int:
        return self.expected(t, seq) - self.verified(t, seq, be)

    def cells(self, bucket_map: Sequence[Sequence[int]], keep=lambda seq, be: True) -> list[tuple[int, int, int, int]]:
        """(table, seq, position in the map row, backend) of every mapped cell with a deficit, in
        the order a check reports them."""
        return [(t, seq, k, be) for t in self.tables for seq, row in enumerate(bucket_map)
                for k, be in enumerate(row) if keep(seq, be) and self.deficit(t, seq, be) > 0]


@dataclass(frozen=True)
class _Lacking:
    """A committed partition's bucket without a verified replica on a backend (``state`` and
    ``path`` of the replica row there, if any)."""

    table_id: int
    partition_id: int
    partition: str
    version: int
    bucket_seq: int
    backend_id: int
    state: str | None
    path: str | None



def _shown(seqs: list[int]) -> str:
    return ", ".join(map(str, seqs[:8])) + (", ..." if len(seqs) > 8 else "")


def _where_buckets_are(b, seqs: list[int], bucket_map: list[list[int]], backends: dict) -> str:
    """What a backend that is not alive means for its buckets: a bucket whose map row still names
    an alive backend has a replica there (reads go on, it is under-replicated: "have a replica on
    be2, which is down"); one with no alive backend left is not readable ("not on an alive backend")."""
    def readable(seq: int) -> bool:
        return any(be != b.id and be in backends and backends[be].state == "alive" for be in bucket_map[seq])

    kept = [seq for seq in seqs if readable(seq)]
    lost = [seq for seq in seqs if not readable(seq)]
    parts = []
    if kept:
        parts.append(f"bucket seqs {_shown(kept)} have a replica on {b.name}, which is {b.state}")
    if lost:
        parts.append(f"bucket seqs {_shown(lost)} are not on an alive backend")
    return "; ".join(parts)

def _digest(g: m.ColocateGroup, bucket_map: list[list[int]], backends: dict, job: m.Job | None) -> str:
    """Everything a check reads besides the replicas (those bump the generation)."""
    parts = [f"g{g.generation}", repr(bucket_map)]
    for be in sorted({be for row in bucket_map for be in row}):
        b = backends.get(be)
        parts.append(f"{be}:-" if b is None else f"{be}:{b.state}:{utc(b.state_since).isoformat()}:{b.state_reason}")
    parts.append(f"job:{job.id}:{job.kind}:{job.progress.get('step', 'planned')}" if job is not None else "job:-")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _problem_text(state: str | None) -> str:
    return ("no verified replica" if state is None else
            "replica failed its checksum (bad)" if state == "bad" else f"replica is {state}")


# Finders of bad replicas that name themselves in the reason; anything else is a read's check.
SOURCES = ("probe sample:", "read check:", "verify:")


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

        return self._tx(run)

    def finish_decommissions(self) -> list[str]:
        """Decommissioning backends that no bucket map names and that hold no replica any more
        become ``decommissioned`` (then ``colocate backend remove`` may delete them)."""
        def run(s: Session) -> list[str]:
            used = {be for ids in s.scalars(select(m.BucketMap.backend_ids)) for be in ids}
            done = []
            for b in s.scalars(select(m.Backend).where(m.Backend.state == "decommissioning").order_by(m.Backend.id)):
                holding = s.scalar(select(exists().where(m.Replica.backend_id == b.id)))
                if b.id not in used and not holding:
                    self._event(s, "backend.state", b.name, id=b.id, old=b.state, new="decommissioned", reason="drained")
                    b.state, b.state_since, b.state_reason = "decommissioned", self.now(), "drained"
                    done.append(b.name)
            return done

        return self._tx(run)

    def _buckets(self, s: Session, g: m.ColocateGroup) -> _Buckets:
        """The group's live tables and their summaries: a handful of small queries."""
        tables = {t.id: t for t in s.scalars(select(m.Table).where(m.Table.group_id == g.id, m.Table.state == "normal")
                                             .order_by(m.Table.id))}
        db_names = {d.id: d.name for d in s.scalars(select(m.Database))}
        labels = {t.id: f"{db_names.get(t.db_id, '?')}.{t.name}" for t in tables.values()}
        bk = _Buckets(group=g, tables=tables, labels=labels, committed={}, counts={})
        if not tables:
            return bk
        ids = list(tables)
        q = (select(m.Partition.table_id, m.Partition.bucket_num, func.count())
             .where(m.Partition.table_id.in_(ids), m.Partition.visible_version > 0)
             .group_by(m.Partition.table_id, m.Partition.bucket_num))
        for t, buckets, n in s.execute(q):
            bk.committed.setdefault(t, {})[buckets] = int(n)
        for r in s.scalars(select(m.BucketReplicas).where(m.BucketReplicas.table_id.in_(ids))):
            bk.counts[(r.table_id, r.bucket_seq, r.backend_id)] = (r.verified, r.bytes, r.bad)
        for r in s.scalars(select(m.BucketSize).where(m.BucketSize.table_id.in_(ids))):
            bk.sizes[(r.table_id, r.bucket_seq)] = r.bytes
        return bk

    @staticmethod
    def _lacking(s: Session, t: int, seq: int, be: int, limit: int | None = None) -> list[_Lacking]:
        """Committed partitions of table ``t`` whose bucket ``seq`` has no verified replica on
        backend ``be``, by partition value: an index walk that stops at ``limit``."""
        q = (select(m.Partition.id, m.Partition.value, m.Partition.visible_version, m.Replica.state, m.Replica.path)
             .select_from(m.Partition)
             .outerjoin(m.Replica, and_(m.Replica.partition_id == m.Partition.id,
                                        m.Replica.version == m.Partition.visible_version, m.Replica.table_id == t,
                                        m.Replica.bucket_seq == seq, m.Replica.backend_id == be))
             .where(m.Partition.table_id == t, m.Partition.visible_version > 0, m.Partition.bucket_num > seq,
                    or_(m.Replica.id.is_(None), m.Replica.state != "verified"))
             .order_by(m.Partition.value))
        if limit is not None:
            q = q.limit(limit)
        return [_Lacking(t, pid, value, version, seq, be, state, path) for pid, value, version, state, path in s.execute(q)]

    def _lacking_rows(self, s: Session, cells: Sequence[tuple[int, int, int, int]],
                      limit: int | None = None) -> list[_Lacking]:
        """The detail of ``cells`` ((table, seq, position, backend), see :meth:`_Buckets.cells`) in
        check order: table, partition (as the database orders values), seq, position in the map row."""
        out: list[_Lacking] = []
        by_table: dict[int, list[tuple[int, int, int, int]]] = {}
        for cell in cells:
            by_table.setdefault(cell[0], []).append(cell)
        for t, mine in by_table.items():
            left = None if limit is None else limit - len(out)
            if left is not None and left <= 0:
                break
            rows = [(seq, k, row) for _, seq, k, be in mine for row in self._lacking(s, t, seq, be, left)]
            if len(mine) > 1:
                rank = {pid: i for i, pid in enumerate(s.scalars(
                    select(m.Partition.id).where(m.Partition.table_id == t, m.Partition.visible_version > 0)
                    .order_by(m.Partition.value)))}
                rows.sort(key=lambda x: (rank[x[2].partition_id], x[0], x[1]))
            out += [row for _, _, row in rows[:left]]
        return out

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

    def _problems(self, s: Session, g: m.ColocateGroup, *,
                  exclude_job: int | None = None) -> tuple[list[Reason], int, bool]:
        """Why the group is not stable: (the first MAX_REASONS reasons, how many problems, whether
        the last computed answer was reused because nothing it reads changed since)."""
        job = self._active_job(s, g.id, exclude_job)
        bucket_map = self._map(s, g.id)
        backends = {b.id: b for b in s.scalars(select(m.Backend))}
        inputs = _digest(g, bucket_map, backends, job)
        last = s.get(m.GroupCheck, g.id)
        if last is not None and last.inputs == inputs:
            return [Reason(**d) for d in last.reasons], last.problems, True
        reasons: list[Reason] = []
        count = 0

        def add(reason: Reason) -> None:
            nonlocal count
            count += 1
            if len(reasons) < MAX_REASONS:
                reasons.append(reason)

        if job is not None:
            add(Reason(f"balance job {job.id} ({job.kind}, step {job.progress.get('step', 'planned')}) is changing the group"))
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
                add(Reason(f"backend {b.name} is {b.state} since {since} ({b.state_reason or 'no reason given'}): "
                           + _where_buckets_are(b, seqs_of[be], bucket_map, backends), backend=b.name))
        alive = {be for be, b in backends.items() if b.state == "alive"}  # others are reported once above
        bk = self._buckets(s, g)
        cells = bk.cells(bucket_map, lambda seq, be: be in alive)
        for row in self._lacking_rows(s, cells, MAX_REASONS - len(reasons)):
            reasons.append(Reason(_problem_text(row.state), table=bk.labels[row.table_id], partition=row.partition,
                                  version=row.version, bucket=row.bucket_seq, backend=backends[row.backend_id].name))
        count += sum(bk.deficit(t, seq, be) for t, seq, _, be in cells)
        detail = [asdict(r) for r in reasons]
        if last is None:
            s.add(m.GroupCheck(group_id=g.id, inputs=inputs, problems=count, reasons=detail, computed_at=self.now()))
        else:
            last.inputs, last.problems, last.reasons, last.computed_at = inputs, count, detail, self.now()
        return reasons, count, False

    def _record_check(self, s: Session, g: m.ColocateGroup, reasons: list[Reason], count: int,
                      reused: bool = False) -> GroupHealth:
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
                           problems=count, checked_at=now, changed=changed, reused=reused)

    def check_group(self, ref: str, *, db: str = "default") -> GroupHealth:
        """Compute whether the group is stable from its replicas, record the answer and the
        reasons (replacing any manual mark), and return them. When nothing the last computation
        read has changed (the group's generation, map, mapped backends' states, balance job), its
        answer is reused at the cost of a few small queries."""
        def run(s: Session) -> GroupHealth:
            g = self._group(s, ref, db)
            reasons, count, reused = self._problems(s, g)
            return self._record_check(s, g, reasons, count, reused)

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

    @staticmethod
    def _whole(seq: int, row: Sequence[int]):
        """A replica's bucket has a verified replica of its version on every backend of ``row``."""
        others = aliased(m.Replica)
        return and_(*[exists().where(others.partition_id == m.Replica.partition_id, others.version == m.Replica.version,
                                     others.bucket_seq == seq, others.backend_id == be, others.state == "verified")
                      for be in row])

    def _redundant(self, s: Session, bk: _Buckets, bucket_map: list[list[int]]) -> int:
        """Replicas (verified or bad) of visible versions on backends the map does not name, in
        buckets that are whole on the map (what a finished job marks for dropping)."""
        extras: dict[tuple[int, int], int] = defaultdict(int)
        for (t, seq, be), (v, _, bad) in bk.counts.items():
            if t in bk.tables and seq < len(bucket_map) and be not in bucket_map[seq]:
                extras[(t, seq)] += v + bad
        n = 0
        for (t, seq), extra in sorted(extras.items()):
            row = bucket_map[seq]
            if not extra:
                continue
            if all(bk.deficit(t, seq, be) == 0 for be in row):
                n += extra
                continue
            n += s.scalar(select(func.count()).select_from(m.Replica).join(m.Partition, VISIBLE).where(
                    m.Replica.table_id == t, m.Replica.bucket_seq == seq, m.Replica.backend_id.not_in(row),
                    m.Replica.state.in_(("verified", "bad")), self._whole(seq, row)))
        return n

    def placement_snapshot(self, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> ClusterSnapshot:
        """Everything the balance planner reads, in one consistent transaction, from the summaries."""
        def run(s: Session) -> ClusterSnapshot:
            now = self.now()
            backends = tuple(self._health(b, now, relocate_delay) for b in s.scalars(select(m.Backend).order_by(m.Backend.id)))
            alive = {b.id for b in backends if b.alive}
            groups = []
            in_group: set[int] = set()
            for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id)):
                view = self._group_view(s, g)
                bucket_map = self._map(s, g.id)
                bk = self._buckets(s, g)
                in_group.update(bk.tables)
                sizes = [0] * g.bucket_num
                for (_, seq), size in bk.sizes.items():
                    if seq < min(g.bucket_num, len(bucket_map)):
                        sizes[seq] += size
                repairs = sum(bk.deficit(t, seq, be) for t in bk.tables for seq, row in enumerate(bucket_map)
                              for be in row if be in alive)
                job = self._active_job(s, g.id)
                groups.append(GroupSnapshot(grp_id=g.id, group_id=view.group_id, full_name=view.full_name,
                                            bucket_num=g.bucket_num, replication_num=g.replication_num,
                                            bucket_map=tuple(tuple(r) for r in bucket_map), bucket_bytes=tuple(sizes),
                                            active_job=job.id if job else None, repairs=repairs,
                                            redundant=self._redundant(s, bk, bucket_map)))
            other: dict[int, int] = defaultdict(int)
            q = (select(m.BucketReplicas.table_id, m.BucketReplicas.backend_id, func.sum(m.BucketReplicas.bytes))
                 .group_by(m.BucketReplicas.table_id, m.BucketReplicas.backend_id))
            for table_id, be, size in s.execute(q):
                if table_id not in in_group and size:
                    other[be] += int(size)
            flags = {f: False for f in ("disable_colocate_balance", "disable_colocate_relocate", "disable_colocate_join")}
            flags.update({r.name: r.value for r in s.scalars(select(m.Flag))})
            return ClusterSnapshot(now=now, relocate_delay=relocate_delay, backends=backends, groups=tuple(groups),
                                   other_bytes=dict(other), flags=flags)

        return self._tx(run)

    def replicas_to_verify(self, *, groups: Sequence[str] | None = None, limit: int | None = None,
                           db: str = "default", table_ids: Sequence[int] | None = None) -> list[VerifyNeed]:
        """Verified replicas of the visible versions of group tables (of ``table_ids`` only, if
        given) on alive backends, the ones re-hashed longest ago (or never) first."""
        def run(s: Session) -> list[VerifyNeed]:
            if groups:
                gids = sorted({self._group(s, ref, db).id for ref in groups})
            else:
                gids = list(s.scalars(select(m.ColocateGroup.id)))
            alive = list(s.scalars(select(m.Backend.id).where(m.Backend.state == "alive")))
            q = (select(m.Replica.id, m.Replica.backend_id, m.Replica.path, m.Replica.checksum, m.Replica.bytes,
                        m.Replica.table_id, m.Partition.value, m.Replica.bucket_seq, m.Replica.rows)
                 .join(m.Partition, VISIBLE).join(m.Table, m.Table.id == m.Replica.table_id)
                 .where(m.Table.group_id.in_(gids), m.Table.state == "normal", m.Replica.state == "verified",
                        m.Replica.backend_id.in_(alive))
                 .order_by(m.Replica.verified_at.asc().nulls_first(), m.Replica.id))
            if table_ids is not None:
                q = q.where(m.Replica.table_id.in_(list(table_ids)))
            if limit is not None:
                q = q.limit(limit)
            return [VerifyNeed(*row) for row in s.execute(q)]

        return self._tx(run)

    def _mark_bad(self, s: Session, marks: Sequence[tuple[m.Replica, str, str]]) -> list[str]:
        """Mark replicas ``bad`` ((replica row, event reason, group reason)) and their groups
        unstable with that reason, keeping the summaries current: the one path for a checksum that
        no longer matches (verify), a missing, short or unknown file (a read), a corrupt clone
        source. A bad replica is never chosen for a read, and the next balance repairs it."""
        marks = [(r, why, group_why) for r, why, group_why in marks if r.state == "verified"]
        bad = []
        with tracking(s, buckets={(r.partition_id, r.bucket_seq) for r, _, _ in marks}):
            for r, why, group_why in marks:
                r.state = "bad"
                bad.append(r.path)
                self._event(s, "replica.bad", r.path, replica_id=r.id, backend_id=r.backend_id, reason=why[:2000])
                t = s.get(m.Table, r.table_id)
                g = s.get(m.ColocateGroup, t.group_id) if t is not None and t.group_id is not None else None
                if g is not None:
                    if g.stable:
                        g.version += 1
                    g.stable = False
                    g.unstable_reason = group_why[:2000]
                    g.unstable_detail = [asdict(Reason(group_why[:2000]))]
        return bad

    def record_verify(self, results: Iterable) -> list[str]:
        """Apply ``VerifyResult``s: a replica whose files no longer hash to its checksum (or are
        gone) is ``bad`` (lost: the next balance repairs it from a good copy) and its group
        unstable. Returns the paths found bad."""
        results = list(results)

        def run(s: Session) -> list[str]:
            now = self.now()
            rows = [(res, s.get(m.Replica, res.replica_id)) for res in results]
            rows = [(res, r) for res, r in rows if r is not None and r.state == "verified"]
            for res, r in rows:
                if res.ok:
                    r.verified_at = now
            return self._mark_bad(s, [(r, res.error or "checksum mismatch",
                                       f"replica {r.path} failed its checksum: {res.error or 'mismatch'}")
                                      for res, r in rows if not res.ok])

        return self._tx(run)

    def mark_replicas_bad(self, items: Iterable) -> list[str]:
        """Record replicas a read found not to hold exactly their recorded files
        (:class:`~airflow_colocate.planner.contract.BadReplica`: replica id, path, reason) as
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
            return self._mark_bad(s, marks)

        return self._tx(run)
