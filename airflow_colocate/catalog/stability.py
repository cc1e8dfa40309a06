"""Health, stability and balance jobs: the catalog side of repair and clone-and-drop.

A mixin that :class:`~airflow_colocate.catalog.catalog.Catalog` inherits, so these methods share its
transactions (``self._tx``), its event log (``self._event``) and its name resolution. Like the rest
of the catalog, every method that changes state is one transaction with one event row, and returns
plain views.

Words used here:

* a backend is **unavailable** when it is decommissioning (or decommissioned), or has been down
  longer than the relocate delay: placement must replace it. A backend down for less is
  *transiently down*: nothing is relocated yet, but the group is not stable.
* a group is **stable** when every bucket of every committed partition (its visible version) of
  every live table has a verified replica on every backend its bucket map names, every one of those
  backends is alive, and no balance job is changing it. :meth:`check_group` records why not, one
  :class:`Reason` per (table, partition, bucket, backend).
* a **balance job** (kind ``relocate``, ``balance`` or ``repair``) moves a group from ``old_map`` to
  ``new_map``: planned → unstable → clones registered → map switched → finished (stable, redundant
  replicas marked ``dropping``). Its ``progress.step`` says where a killed job resumes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.errors import Conflict, InvalidArgument, NotFound
from airflow_colocate.storage import layout

DEFAULT_RELOCATE_DELAY = timedelta(minutes=30)
DEFAULT_GRACE = timedelta(minutes=10)
MAX_REASONS = 50
BALANCE_KINDS = ("relocate", "balance", "repair")
ACTIVE = "running"
# Steps of a balance job, in order; ``progress.step`` is the last one reached.
STEPS = ("planned", "unstable", "switched", "finished")


def _utc(dt: datetime | None) -> datetime | None:
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=timezone.utc)


# ---------------------------------------------------------------------- views


@dataclass(frozen=True)
class BackendHealth:
    id: int
    name: str
    root_uri: str
    host: str
    capacity_bytes: int | None
    state: str  # alive | down | decommissioning | decommissioned
    state_since: datetime
    last_heartbeat: datetime | None
    state_reason: str | None
    unavailable: bool  # placement must replace it (decommissioning, or down longer than the delay)

    @property
    def alive(self) -> bool:
        return self.state == "alive"

    @property
    def transiently_down(self) -> bool:
        return self.state == "down" and not self.unavailable


@dataclass(frozen=True)
class Reason:
    """One reason a group is not stable. ``table``..``backend`` are empty when it is not about one
    replica (a backend that is down, a job that is running)."""

    problem: str
    table: str = ""
    partition: str = ""
    version: int = 0
    bucket: int = -1
    backend: str = ""

    @property
    def text(self) -> str:
        if not self.table:
            return self.problem
        return f"{self.table}/{self.partition} v{self.version} bucket {self.bucket} on backend {self.backend}: {self.problem}"


@dataclass(frozen=True)
class GroupHealth:
    group_id: str  # dbId.grpId
    full_name: str
    stable: bool
    reasons: tuple[Reason, ...]
    problems: int  # all problems found; ``reasons`` keeps the first MAX_REASONS
    checked_at: datetime
    changed: bool = False  # the check flipped the stable flag or changed the reason

    @property
    def reason(self) -> str | None:
        return summary(self.reasons, self.problems)

    def to_dict(self) -> dict:
        return {"group": self.full_name, "group_id": self.group_id, "stable": self.stable, "reason": self.reason,
                "reasons": [r.text for r in self.reasons], "problems": self.problems,
                "checked_at": self.checked_at.isoformat()}


@dataclass(frozen=True)
class GroupSnapshot:
    """What the balance planner needs to know about one group."""

    grp_id: int
    group_id: str
    full_name: str
    bucket_num: int
    replication_num: int
    bucket_map: tuple[tuple[int, ...], ...]
    bucket_bytes: tuple[int, ...]  # bytes of one replica of each bucket, summed over tables and partitions
    active_job: int | None
    repairs: int  # (table, partition, bucket, backend) of the map with no verified replica, backend alive
    redundant: int  # replicas of visible versions on backends the map does not name


@dataclass(frozen=True)
class ClusterSnapshot:
    now: datetime
    relocate_delay: timedelta
    backends: tuple[BackendHealth, ...]
    groups: tuple[GroupSnapshot, ...]
    other_bytes: dict[int, int]  # backend id -> bytes of visible replicas of tables in no group
    flags: dict[str, bool]


@dataclass(frozen=True)
class CloneNeed:
    """One replica a balance job still has to clone: ``path`` on backend ``backend_id`` from one of
    ``sources`` ((backend id, replica dir), best first), to end up with ``checksum``."""

    table: str
    table_id: int
    partition_id: int
    partition: str
    version: int
    bucket_seq: int
    backend_id: int
    path: str
    checksum: str
    rows: int
    bytes: int
    sources: tuple[tuple[int, str], ...]
    repair: str  # missing | bad


@dataclass(frozen=True)
class Blocked:
    """A replica a job cannot clone now, and why (target not alive, no healthy source, ...)."""

    table: str
    partition: str
    bucket_seq: int
    backend_id: int
    why: str
    target_down: bool = False


@dataclass(frozen=True)
class BalanceJobView:
    id: int
    kind: str
    state: str  # running | done | cancelled
    grp_id: int | None
    group: str
    step: str
    plan: dict
    progress: dict
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SwitchResult:
    switched: bool
    cancelled: bool = False
    missing: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class FinishResult:
    done: bool
    health: GroupHealth | None = None
    dropping: int = 0
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class DropItem:
    replica_id: int
    backend_id: int
    path: str


@dataclass(frozen=True)
class VerifyNeed:
    replica_id: int
    backend_id: int
    path: str
    checksum: str
    bytes: int


@dataclass
class _Scan:
    """The visible replicas of one group: every (live table, committed partition) and, per
    (partition id, bucket seq), the replica rows of the visible version by backend id."""

    group: m.ColocateGroup
    labels: dict[int, str]  # table id -> db.table
    tables: dict[int, m.Table]
    parts: list[tuple[m.Table, m.Partition]]
    by_bucket: dict[tuple[int, int], dict[int, m.Replica]] = field(default_factory=dict)


def summary(reasons: Sequence[Reason], problems: int) -> str | None:
    if not reasons:
        return None
    more = problems - 1
    return reasons[0].text + (f" (and {more} more problem{'s' if more != 1 else ''})" if more > 0 else "")


def is_unavailable(state: str, state_since: datetime | None, now: datetime, delay: timedelta) -> bool:
    if state in ("decommissioning", "decommissioned"):
        return True
    return state == "down" and state_since is not None and now - _utc(state_since) >= delay


# ---------------------------------------------------------------------- the mixin


class StabilityMixin:
    """Catalog methods for the health probe, the stability check and balance jobs."""

    # ---------------------------------------------------------------- health

    def _health(self, b: m.Backend, now: datetime, delay: timedelta) -> BackendHealth:
        return BackendHealth(id=b.id, name=b.name, root_uri=b.root_uri, host=b.host, capacity_bytes=b.capacity_bytes,
                             state=b.state, state_since=_utc(b.state_since), last_heartbeat=_utc(b.last_heartbeat),
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

    # ---------------------------------------------------------------- scanning

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

    # ---------------------------------------------------------------- stability

    def _problems(self, s: Session, g: m.ColocateGroup, *, exclude_job: int | None = None,
                  scan: _Scan | None = None) -> tuple[list[Reason], int]:
        now = self.now()
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
                since = _utc(b.state_since).isoformat(timespec="seconds")
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
                               reasons=reasons, problems=len(reasons), checked_at=_utc(g.checked_at) or self.now())

        return self._tx(run)

    # ---------------------------------------------------------------- planning input

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

    # ---------------------------------------------------------------- balance jobs

    def _job_view(self, s: Session, job: m.Job) -> BalanceJobView:
        g = s.get(m.ColocateGroup, job.group_id) if job.group_id is not None else None
        name = self._group_view(s, g).full_name if g is not None else job.plan.get("group", "")
        return BalanceJobView(id=job.id, kind=job.kind, state=job.state, grp_id=job.group_id, group=name,
                              step=job.progress.get("step", ""), plan=job.plan, progress=job.progress,
                              created_at=_utc(job.created_at), updated_at=_utc(job.updated_at))

    def _balance_job(self, s: Session, job_id: int) -> tuple[m.Job, m.ColocateGroup]:
        job = s.get(m.Job, job_id)
        if job is None or job.kind not in BALANCE_KINDS:
            raise NotFound(f"unknown balance job {job_id}: 'colocate jobs list' shows the jobs")
        g = s.get(m.ColocateGroup, job.group_id) if job.group_id is not None else None
        if g is None:
            raise Conflict(f"balance job {job_id}: its group was removed while it ran")
        return job, g

    def balance_job(self, job_id: int) -> BalanceJobView:
        def run(s: Session) -> BalanceJobView:
            job = s.get(m.Job, job_id)
            if job is None:
                raise NotFound(f"unknown job {job_id}")
            return self._job_view(s, job)

        return self._tx(run)

    def jobs(self, *, kind: str | None = None, state: str | None = None, limit: int = 50) -> list[BalanceJobView]:
        """Jobs of every kind, newest first (``colocate jobs list``)."""
        def run(s: Session) -> list[BalanceJobView]:
            q = select(m.Job).order_by(m.Job.id.desc()).limit(limit)
            if kind:
                q = q.where(m.Job.kind == kind)
            if state:
                q = q.where(m.Job.state == state)
            return [self._job_view(s, j) for j in s.scalars(q)]

        return self._tx(run)

    def active_balance_jobs(self) -> list[BalanceJobView]:
        def run(s: Session) -> list[BalanceJobView]:
            q = select(m.Job).where(m.Job.kind.in_(BALANCE_KINDS), m.Job.state == ACTIVE).order_by(m.Job.id)
            return [self._job_view(s, j) for j in s.scalars(q)]

        return self._tx(run)

    def create_balance_job(self, grp_id: int, kind: str, plan: dict) -> BalanceJobView:
        """Persist a plan as a job (step ``planned``). Refused if the group already has an active
        balance job or its map is no longer the one the plan started from."""
        if kind not in BALANCE_KINDS:
            raise InvalidArgument(f"invalid balance job kind {kind!r}: expected one of {', '.join(BALANCE_KINDS)}")

        def run(s: Session) -> BalanceJobView:
            g = s.get(m.ColocateGroup, grp_id)
            if g is None:
                raise NotFound(f"unknown colocation group id {grp_id}")
            name = self._group_view(s, g).full_name
            other = self._active_job(s, g.id)
            if other is not None:
                raise Conflict(f"group {name} already has balance job {other.id} running: it is resumed, not planned again")
            if self._map(s, g.id) != [list(r) for r in plan["old_map"]]:
                raise Conflict(f"the bucket map of group {name} changed since it was planned: plan again")
            now = self.now()
            job = m.Job(kind=kind, group_id=g.id, state=ACTIVE, plan=dict(plan, group=name),
                        progress={"step": "planned", "rounds": 0, "cloned": 0, "bytes": 0},
                        created_at=now, updated_at=now)
            s.add(job)
            s.flush()
            self._event(s, "balance.plan", name, job_id=job.id, job_kind=kind, moves=len(plan.get("moves", [])),
                        bytes=sum(mv["bytes"] for mv in plan.get("moves", [])))
            return self._job_view(s, job)

        return self._tx(run)

    def begin_balance(self, job_id: int) -> BalanceJobView:
        """Step 2: the group is unstable while the job changes it (joins fall back)."""
        def run(s: Session) -> BalanceJobView:
            job, g = self._balance_job(s, job_id)
            if job.progress.get("step") != "planned" or job.state != ACTIVE:
                return self._job_view(s, job)
            moves = job.plan.get("moves", [])
            why = (f"balance job {job.id} ({job.kind}) is moving {len(moves)} bucket replicas" if moves
                   else f"balance job {job.id} is repairing replicas")
            if g.stable:
                g.version += 1
            g.stable, g.unstable_reason = False, why
            g.unstable_detail = [asdict(Reason(why))]
            job.progress = dict(job.progress, step="unstable", started_at=self.now().isoformat())
            job.updated_at = self.now()
            self._event(s, "balance.start", self._group_view(s, g).full_name, job_id=job.id, reason=why)
            return self._job_view(s, job)

        return self._tx(run)

    def revise_balance_job(self, job_id: int, new_map: Sequence[Sequence[int]], moves: Sequence[dict], note: str) -> BalanceJobView:
        """Change the target of a job before its switch (a lost backend came back early)."""
        def run(s: Session) -> BalanceJobView:
            job, g = self._balance_job(s, job_id)
            if job.state != ACTIVE or job.progress.get("step") not in ("planned", "unstable"):
                raise Conflict(f"balance job {job_id} is past its switch ({job.progress.get('step')}): it cannot be revised")
            job.plan = dict(job.plan, new_map=[list(r) for r in new_map], moves=list(moves))
            notes = list(job.progress.get("notes", [])) + [note]
            job.progress = dict(job.progress, notes=notes[-20:])
            job.updated_at = self.now()
            self._event(s, "balance.revise", self._group_view(s, g).full_name, job_id=job.id, note=note,
                        moves=len(moves))
            return self._job_view(s, job)

        return self._tx(run)

    def cancel_balance_job(self, job_id: int, reason: str) -> BalanceJobView:
        """Stop a job before its switch (the map is unchanged; clones it made are redundant and
        dropped by the next repair). After the switch a job can only finish."""
        def run(s: Session) -> BalanceJobView:
            job, g = self._balance_job(s, job_id)
            if job.state != ACTIVE:
                return self._job_view(s, job)
            if job.progress.get("step") in ("switched", "finished"):
                raise Conflict(f"balance job {job_id} already switched the map of its group: it can only finish "
                               f"(run 'colocate balance' again)")
            job.state, job.updated_at = "cancelled", self.now()
            job.progress = dict(job.progress, cancelled=reason[:2000])
            self._event(s, "balance.cancel", self._group_view(s, g).full_name, job_id=job.id, reason=reason[:2000])
            s.flush()
            reasons, count = self._problems(s, g)
            self._record_check(s, g, reasons, count)
            return self._job_view(s, job)

        return self._tx(run)

    def _target(self, s: Session, job: m.Job, g: m.ColocateGroup) -> list[list[int]]:
        if job.progress.get("step") in ("switched", "finished"):
            return self._map(s, g.id)
        return [list(r) for r in job.plan["new_map"]]

    def clone_needs(self, job_id: int) -> tuple[list[CloneNeed], list[Blocked]]:
        """Every replica the job's target map names that has no verified copy yet: before the
        switch the target is the planned map, after it the group's map (so writes that landed on
        the old map meanwhile are cloned too)."""
        def run(s: Session) -> tuple[list[CloneNeed], list[Blocked]]:
            job, g = self._balance_job(s, job_id)
            target = self._target(s, job, g)
            current = self._map(s, g.id)
            switched = job.progress.get("step") in ("switched", "finished")
            old = [list(r) for r in job.plan["old_map"]]
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            moved_from: dict[tuple[int, int], int] = {(mv["bucket_seq"], mv["dst"]): mv["src"] for mv in job.plan.get("moves", [])}
            scan = self._scan(s, g)
            db_names = {d.id: d.name for d in s.scalars(select(m.Database))}
            needs: list[CloneNeed] = []
            blocked: list[Blocked] = []
            for t, p in scan.parts:
                label = scan.labels[t.id]
                for seq in range(min(p.bucket_num, len(target))):
                    have = scan.by_bucket.get((p.id, seq), {})
                    for be in target[seq]:
                        r = have.get(be)
                        if r is not None and r.state == "verified":
                            continue
                        b = backends.get(be)
                        if b is None or b.state != "alive":
                            if not switched and be not in old[seq]:  # a move's destination died: plan again
                                blocked.append(Blocked(label, p.value, seq, be,
                                                       f"target backend {b.name if b else be} is not alive", target_down=True))
                            continue  # a mapped backend that is down: repaired when it is back or relocated
                        if r is not None and r.state == "deleting":
                            blocked.append(Blocked(label, p.value, seq, be, "an old replica there is being deleted"))
                            continue
                        good = [x for x in have.values() if x.state == "verified" and x.backend_id != be
                                and backends.get(x.backend_id) is not None and backends[x.backend_id].state == "alive"]
                        if not good:
                            held = [backends[x.backend_id].name for x in have.values() if x.state == "verified"
                                    and x.backend_id in backends]
                            why = (f"no alive backend holds a verified replica (verified on: {', '.join(held)})" if held
                                   else "no verified replica left anywhere: the bucket is lost; rewrite the partition")
                            blocked.append(Blocked(label, p.value, seq, be, why))
                            continue
                        src = moved_from.get((seq, be))

                        def rank(x: m.Replica, src=src, row=current[seq] if seq < len(current) else []) -> tuple:
                            return (x.backend_id != src, x.backend_id not in row, x.backend_id)

                        good.sort(key=rank)
                        path = r.path if r is not None else layout.replica_dir(
                            b.root_uri, db_names.get(t.db_id, "default"), t.name, t.id, p.value, p.visible_version, seq)
                        needs.append(CloneNeed(table=label, table_id=t.id, partition_id=p.id, partition=p.value,
                                               version=p.visible_version, bucket_seq=seq, backend_id=be, path=path,
                                               checksum=good[0].checksum, rows=good[0].rows, bytes=good[0].bytes,
                                               sources=tuple((x.backend_id, x.path) for x in good),
                                               repair="bad" if r is not None and r.state == "bad" else "missing"))
            return needs, blocked

        return self._tx(run)

    def register_clones(self, job_id: int, results: Iterable) -> tuple[int, list[str]]:
        """Record the replicas a clone job verified (``CloneResult``s with ``ok``) as ``verified``;
        a clone that found its source's bytes differ from the catalog marks that source ``bad``.
        Returns (replicas registered, directories to delete: clones of versions that were
        garbage-collected while the clone ran)."""
        results = list(results)

        def run(s: Session) -> tuple[int, list[str]]:
            job, g = self._balance_job(s, job_id)
            now = self.now()
            added, stale, failed, bad = 0, [], [], []
            for res in results:
                if not res.ok:
                    failed.append(f"{res.path}: {res.error}")
                    if res.source_bad:
                        src = s.scalar(select(m.Replica).where(m.Replica.partition_id == res.partition_id,
                                                               m.Replica.version == res.version,
                                                               m.Replica.bucket_seq == res.bucket_seq,
                                                               m.Replica.backend_id == res.src_backend_id))
                        if src is not None and src.state == "verified":
                            src.state = "bad"
                            bad.append(src.path)
                            self._event(s, "replica.bad", src.path, replica_id=src.id, backend_id=src.backend_id,
                                        reason=(res.error or "checksum mismatch while cloning")[:2000])
                    continue
                pv = s.get(m.PartitionVersion, (res.partition_id, res.version))
                if pv is None or pv.state not in ("committed", "superseded"):
                    stale.append(res.path)
                    continue
                row = s.scalar(select(m.Replica).where(m.Replica.partition_id == res.partition_id,
                                                       m.Replica.version == res.version,
                                                       m.Replica.bucket_seq == res.bucket_seq,
                                                       m.Replica.backend_id == res.backend_id))
                if row is not None and row.state == "deleting":
                    continue  # its files are being removed; the next round clones again
                p = s.get(m.Partition, res.partition_id)
                if row is None:
                    row = m.Replica(table_id=p.table_id, partition_id=p.id, version=res.version, bucket_seq=res.bucket_seq,
                                    backend_id=res.backend_id, state="verified", path=res.path, rows=res.rows,
                                    bytes=res.bytes, checksum=res.checksum, created_at=now, verified_at=now)
                    s.add(row)
                else:
                    row.state, row.path, row.rows, row.bytes, row.checksum = "verified", res.path, res.rows, res.bytes, res.checksum
                    row.verified_at, row.drop_after = now, None
                added += 1
            progress = dict(job.progress)
            progress["rounds"] = progress.get("rounds", 0) + 1
            progress["cloned"] = progress.get("cloned", 0) + added
            progress["bytes"] = progress.get("bytes", 0) + sum(r.bytes for r in results if r.ok)
            if failed:
                progress["errors"] = (list(progress.get("errors", [])) + failed)[-20:]
            job.progress, job.updated_at = progress, now
            self._event(s, "balance.clone", self._group_view(s, g).full_name, job_id=job.id, registered=added,
                        failed=len(failed), bad_sources=bad, stale=len(stale))
            return added, stale

        return self._tx(run)

    def move_progress(self, job_id: int) -> list[tuple[int, int]]:
        """Per planned move: (bytes already verified on its destination, bytes of the bucket)."""
        def run(s: Session) -> list[tuple[int, int]]:
            job, g = self._balance_job(s, job_id)
            scan = self._scan(s, g)
            out = []
            for mv in job.plan.get("moves", []):
                copied = total = 0
                for _, p in scan.parts:
                    have = scan.by_bucket.get((p.id, mv["bucket_seq"]), {})
                    good = [r.bytes for r in have.values() if r.state == "verified"]
                    total += max(good) if good else 0
                    r = have.get(mv["dst"])
                    if r is not None and r.state == "verified":
                        copied += r.bytes
                out.append((copied, total))
            return out

        return self._tx(run)

    def switch_map(self, job_id: int) -> SwitchResult:
        """Step 4: make the planned map the group's map, once every replica it adds is verified.
        Cancels the job when the map changed under it (it is then planned again)."""
        def run(s: Session) -> SwitchResult:
            job, g = self._balance_job(s, job_id)
            if job.state != ACTIVE:
                return SwitchResult(False, cancelled=job.state == "cancelled", reason=f"job is {job.state}")
            if job.progress.get("step") in ("switched", "finished"):
                return SwitchResult(True)
            current = self._map(s, g.id)
            old = [list(r) for r in job.plan["old_map"]]
            new = [list(r) for r in job.plan["new_map"]]
            name = self._group_view(s, g).full_name
            if current != old and current != new:
                job.state, job.updated_at = "cancelled", self.now()
                job.progress = dict(job.progress, cancelled="the bucket map changed under the job")
                self._event(s, "balance.cancel", name, job_id=job.id, reason="the bucket map changed under the job")
                return SwitchResult(False, cancelled=True, reason="the bucket map changed under the job")
            scan = self._scan(s, g)
            missing = []
            for t, p in scan.parts:
                for seq in range(min(p.bucket_num, len(new))):
                    have = scan.by_bucket.get((p.id, seq), {})
                    for be in new[seq]:
                        if be in old[seq]:
                            continue  # not moved: an in-place repair, done after the switch if needed
                        r = have.get(be)
                        if r is None or r.state != "verified":
                            missing.append(f"{scan.labels[t.id]}/{p.value} bucket {seq} on backend {be}")
            if missing:
                return SwitchResult(False, missing=tuple(missing))
            now = self.now()
            if current != new:
                for row in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)):
                    row.backend_ids = list(new[row.bucket_seq])
                g.version += 1
                self._event(s, "group.switch_map", name, job_id=job.id, old_map=old, new_map=new,
                            moves=len(job.plan.get("moves", [])))
            g.stable = False
            g.unstable_reason = (f"balance job {job.id} switched the bucket map; cloning what landed meanwhile"
                                 if current != new else f"balance job {job.id} is repairing replicas")
            g.unstable_detail = [asdict(Reason(g.unstable_reason))]
            job.progress = dict(job.progress, step="switched", switched_at=now.isoformat())
            job.updated_at = now
            return SwitchResult(True)

        return self._tx(run)

    def finish_balance_job(self, job_id: int, *, grace: timedelta = DEFAULT_GRACE) -> FinishResult:
        """Steps 5 and 6: once every replica the map names on an alive backend is verified, mark
        replicas the map no longer names ``dropping`` (deleted after ``grace``), end the job, and
        record the group's stability. A bucket's old replicas are only marked when all of its
        mapped replicas are verified, so a bucket never loses its last verified replica."""
        def run(s: Session) -> FinishResult:
            job, g = self._balance_job(s, job_id)
            if job.state != ACTIVE:
                return FinishResult(done=job.state == "done")
            if job.progress.get("step") not in ("switched", "finished"):
                raise Conflict(f"balance job {job_id} has not switched its map yet (step {job.progress.get('step')})")
            bucket_map = self._map(s, g.id)
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            scan = self._scan(s, g)
            missing = []
            for t, p in scan.parts:
                for seq in range(min(p.bucket_num, len(bucket_map))):
                    have = scan.by_bucket.get((p.id, seq), {})
                    for be in bucket_map[seq]:
                        r = have.get(be)
                        b = backends.get(be)
                        if b is not None and b.state == "alive" and (r is None or r.state != "verified"):
                            missing.append(f"{scan.labels[t.id]}/{p.value} bucket {seq} on backend {b.name}")
            if missing:
                return FinishResult(done=False, missing=tuple(missing))
            now = self.now()
            dropping = self._mark_redundant(s, scan, bucket_map, now + grace)
            job.state, job.updated_at = "done", now
            job.progress = dict(job.progress, step="finished", finished_at=now.isoformat(), dropping=dropping)
            self._event(s, "balance.finish", self._group_view(s, g).full_name, job_id=job.id, dropping=dropping)
            s.flush()
            reasons, count = self._problems(s, g, scan=scan)
            health = self._record_check(s, g, reasons, count)
            return FinishResult(done=True, health=health, dropping=dropping)

        return self._tx(run)

    @staticmethod
    def _mark_redundant(s: Session, scan: _Scan, bucket_map: list[list[int]], drop_after: datetime) -> int:
        n = 0
        for _, p in scan.parts:
            for seq in range(min(p.bucket_num, len(bucket_map))):
                have = scan.by_bucket.get((p.id, seq), {})
                row = bucket_map[seq]
                if not all(be in have and have[be].state == "verified" for be in row):
                    continue  # keep every old copy until the bucket is whole on its map
                for be, r in have.items():
                    if be not in row and r.state in ("verified", "bad"):
                        r.state, r.drop_after = "dropping", drop_after
                        n += 1
        return n

    # ---------------------------------------------------------------- drops

    def take_droppable(self) -> list[DropItem]:
        """Replicas whose grace period is over become ``deleting`` and are returned for their files
        to be removed; :meth:`forget_replicas` then deletes the rows. Re-checked here: a replica is
        only dropped while its bucket is whole on its map (a verified replica on every alive backend
        the map names, and at least one); otherwise it is kept, verified, as a source for the repair.
        Replicas on a backend that is down wait until it is back (its files cannot be deleted before)."""
        def run(s: Session) -> list[DropItem]:
            now = self.now()
            items: list[DropItem] = []
            revived = 0
            reachable = set(s.scalars(select(m.Backend.id).where(m.Backend.state.in_(("alive", "decommissioning")))))
            reachable_alive = set(s.scalars(select(m.Backend.id).where(m.Backend.state == "alive")))
            q = select(m.Replica).where(m.Replica.state.in_(("dropping", "deleting"))).order_by(m.Replica.id)
            for r in s.scalars(q):
                if r.backend_id not in reachable:
                    continue  # files on a down backend are deleted when it is back
                if r.state == "dropping":
                    if _utc(r.drop_after) is not None and _utc(r.drop_after) > now:
                        continue
                    t = s.get(m.Table, r.table_id)
                    mapped = set()
                    if t is not None and t.group_id is not None:
                        row = s.scalar(select(m.BucketMap).where(m.BucketMap.group_id == t.group_id,
                                                                 m.BucketMap.bucket_seq == r.bucket_seq))
                        mapped = set(row.backend_ids) if row is not None else set()
                    others = {o.backend_id for o in s.scalars(select(m.Replica).where(
                        m.Replica.partition_id == r.partition_id, m.Replica.version == r.version,
                        m.Replica.bucket_seq == r.bucket_seq, m.Replica.state == "verified"))}
                    if not (others & mapped) or not (mapped & reachable_alive) <= others:
                        # a replacement went bad or missing since: keep this copy as a source
                        r.state, r.drop_after = "verified", None
                        revived += 1
                        continue
                    r.state = "deleting"
                items.append(DropItem(r.id, r.backend_id, r.path))
            if items or revived:
                self._event(s, "replica.drop_start", "catalog", replicas=len(items), revived=revived)
            return items

        return self._tx(run)

    def forget_replicas(self, replica_ids: Iterable[int]) -> int:
        ids = list(replica_ids)

        def run(s: Session) -> int:
            n = 0
            for i in range(0, len(ids), 500):
                for r in s.scalars(select(m.Replica).where(m.Replica.id.in_(ids[i:i + 500]), m.Replica.state == "deleting")):
                    s.delete(r)
                    n += 1
            if n:
                self._event(s, "replica.drop", "catalog", replicas=n)
            return n

        return self._tx(run)

    # ---------------------------------------------------------------- verify (scrub)

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
            rows.sort(key=lambda r: (_utc(r.verified_at) or epoch, r.id))
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


__all__ = [
    "BackendHealth", "BalanceJobView", "Blocked", "CloneNeed", "ClusterSnapshot", "DEFAULT_GRACE",
    "DEFAULT_RELOCATE_DELAY", "DropItem", "FinishResult", "GroupHealth", "GroupSnapshot", "Reason",
    "StabilityMixin", "SwitchResult", "VerifyNeed", "is_unavailable", "summary",
]
