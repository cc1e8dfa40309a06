"""Clone-and-drop: run repair and balance jobs to the end, resumably.

The control-plane loop behind ``ColocateBalanceOperator`` and ``colocate balance``. For each group:

1. **plan** (:func:`airflow_colocate.planner.balance.plan_balance`) and persist the plan as a job;
2. mark the group **unstable** (joins fall back to a shuffle from here on);
3. **clone** every (table, partition, bucket) replica the new map needs from a healthy source with
   the Spark clone job, verified by size and checksum, and register the verified copies;
4. **switch** the bucket map (refused until every replica it adds is verified);
5. clone what landed on the old map meanwhile (writes that ran during the balance), then mark the
   group **stable** once every replica matches;
6. **close** the job: the replicas the map no longer names are marked (the group is already stable)
   and **dropped** after a grace period.

Every step is one catalog transaction that records the job's ``progress.step``; a run killed at any
point is picked up by the next run, which redoes only what is not recorded. Nothing is dropped
before its replacement is verified, and a bucket never loses its last verified replica
(``BalanceJobs.close`` and ``take_droppable`` in :mod:`airflow_colocate.catalog.balance_jobs`).
The Spark part is a ``runner`` (:mod:`airflow_colocate.jobs.runners`), ``ClonePlan`` to ``CloneReport``.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

from airflow_colocate.model.views import DEFAULT_GRACE, DEFAULT_RELOCATE_DELAY, JobView, CloneNeed
from airflow_colocate.core.contract import ClonePlan, CloneReport, VerifyTask
from airflow_colocate.core.errors import Conflict, InvalidArgument
from airflow_colocate.core.paths import default_work_dir
from airflow_colocate.jobs import balance_outcome, metrics
from airflow_colocate.jobs.balance_outcome import PendingRelocation, pending_relocations, planned_bytes
from airflow_colocate.jobs.gc import delete_replicas
from airflow_colocate.jobs.iceberg import follow_all
from airflow_colocate.jobs.health import waiting_to_relocate
from airflow_colocate.jobs.runners import Runner, session_runner
from airflow_colocate.planner.balance import GroupPlan, plan_balance
from airflow_colocate.planner.clones import clone_batches, clone_plan
from airflow_colocate.storage import fs

StepHook = Callable[[str, int | None], None]

log = logging.getLogger("airflow_colocate.jobs.balance")


@dataclass
class BalanceOptions:
    """How a balance run behaves.

    :param strategy: ``count`` (slots per backend, the seeds') or ``size`` (bytes against capacity).
    :param threshold: skip moves that gain less than this fraction of the average (0 = none).
    :param relocate_delay: how long a backend may be down before its buckets are relocated.
    :param grace: how long a replica the map no longer names is kept for readers that planned
        before the switch.
    :param comeback_fraction: a backend that comes back before its relocation copied this share of
        its bytes gets its buckets back (the partial copies are dropped) instead of a full re-clone.
    :param max_rounds: clone rounds per step before the run leaves the job for the next run.
    :param groups: group refs to work on (default all).
    :param verify: re-hash replicas first; a replica whose checksum no longer matches is bad and repaired.
    :param verify_limit: at most this many replicas re-hashed per run (the least recently verified).
    :param relocate_now: relocate the buckets of every down backend now, whatever the delay: for an
        operator who knows the disk is gone and will not wait for it to come back (recorded as a
        ``balance.relocate_now`` event with the actor). The planner sees a delay of zero; nothing
        else changes, so placement stays a pure function of the snapshot.
    :param overlap_batches: whether clone batch k+1 copies while batch k is registered. None (the
        default): as the runner says (``concurrent_plans``: the local runner's worker processes do,
        a spark-submit per batch does not); True (env ``COLOCATE_OVERLAP_CLONE_BATCHES=1``): at
        least two batches at once whatever the runner; False (``=0``): one batch at a time.
    """

    strategy: str = "count"
    threshold: float = 0.0
    relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY
    grace: timedelta = DEFAULT_GRACE
    comeback_fraction: float = 0.5
    max_rounds: int = 4
    # a clone job's most before its clones are registered; S3 copies batched apart (clone_batches)
    clone_batch_bytes: int = 1 << 30
    clone_batch_replicas: int = 500
    store_copy_batch_replicas: int = 5000
    groups: Sequence[str] | None = None
    verify: bool = False
    verify_limit: int | None = None
    cross_group: bool = True
    # where relocate_delay came from, for the line that says why a repair waits
    relocate_delay_source: str = "COLOCATE_RELOCATE_DELAY_MINUTES"
    relocate_now: bool = False
    overlap_batches: bool | None = field(default_factory=lambda: {"1": True, "0": False}.get(
        os.environ.get("COLOCATE_OVERLAP_CLONE_BATCHES", "")))

    @property
    def delay(self) -> timedelta:
        """The delay this run applies: zero with ``relocate_now``, else ``relocate_delay``."""
        return timedelta(0) if self.relocate_now else self.relocate_delay

    def __post_init__(self) -> None:
        for what, value in (("relocate delay", self.relocate_delay), ("grace period", self.grace)):
            if value.total_seconds() < 0:
                raise InvalidArgument(f"invalid {what} {value}: it must not be negative (e.g. 30 minutes)")


@dataclass
class JobOutcome:
    job_id: int
    group: str
    kind: str
    state: str  # done | running (left for the next run) | cancelled
    step: str
    moves: int
    cloned: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


def _noop(step: str, job_id: int | None) -> None:
    return None


# A job that moves at least this much starts the local runner's workers ahead (LocalRunner.warm):
# it will copy in worker processes; a small one copies on threads and would start them for nothing.
WARM_MIN_BYTES = 64 << 20


# ---------------------------------------------------------------------- planning


def group_ids(catalog, refs: Sequence[str] | None) -> set[int] | None:
    return {catalog.groups.get(ref).grp_id for ref in refs} if refs else None


def plan(catalog, options: BalanceOptions | None = None) -> list[GroupPlan]:
    """What a run would do now (the dry run): one plan per group in scope."""
    options = options or BalanceOptions()
    snapshot = catalog.balance.snapshot(relocate_delay=options.delay)
    return plan_balance(snapshot, strategy=options.strategy, threshold=options.threshold,
                        groups=group_ids(catalog, options.groups), cross_group=options.cross_group)


def describe_plans(plans: Sequence[GroupPlan], backends: dict[int, str] | None = None, *,
                   with_moves: bool = True) -> list[str]:
    """Human-readable lines of a dry run (``with_moves=False``: no line per move, shown as a table)."""
    name = (lambda be: backends.get(be, str(be))) if backends else str
    lines = []
    for p in plans:
        head = (f"group {p.full_name} ({p.group_id}): {p.kind}, {len(p.moves)} moves, {p.bytes} bytes, "
                f"{p.repairs} in-place repairs, {p.redundant} redundant replicas")
        lines.append(head if p.needs_job else f"group {p.full_name} ({p.group_id}): nothing to do")
        lines += [f"  note: {note}" for note in p.notes]
        lines += [f"  bucket {mv.bucket_seq:>4} [{mv.index}]: {name(mv.src)} -> {name(mv.dst)}  {mv.bytes} bytes  ({mv.why})"
                  for mv in p.moves if with_moves]
    return lines


class Balancer:
    """One balance run over the catalog. ``on_step(step, job_id)`` is called after each recorded
    step (``planned``, ``unstable``, ``cloned``, ``switched``, ``finished``, ``dropping``,
    ``dropped``): tests raise from it to kill a run at exactly that point."""

    def __init__(self, catalog, runner: Runner, options: BalanceOptions | None = None, *,
                 work_dir: str | Path | None = None, on_step: StepHook | None = None,
                 echo: Callable[[str], None] | None = None, backend_names: dict[int, str] | None = None):
        self.catalog = catalog
        self.backend_names = backend_names
        self.runner = runner
        self.options = options or BalanceOptions()
        self.work_dir = str(work_dir or default_work_dir())
        self.on_step = on_step or _noop
        self.echo = echo or log.info
        self._plans = 0
        self._clone_failures: dict[int, dict[int, str]] = {}  # job -> target backend -> its last clone error (not a source's)

    # -- spark ------------------------------------------------------------------------------

    def _run_plan(self, label: str, needs: Sequence[CloneNeed], verifies: Sequence[VerifyTask] = ()) -> CloneReport:
        return self._execute(self._plan_of(label, needs, verifies), label.split("-")[0])

    def _plan_of(self, label: str, needs: Sequence[CloneNeed], verifies: Sequence[VerifyTask] = ()) -> ClonePlan:
        self._plans += 1  # named in the calling thread: a pipelined round runs the plans on others
        job = f"{label}-{self.catalog.now().strftime('%Y%m%dT%H%M%S')}-{self._plans}-{os.urandom(3).hex()}"
        plan_obj = clone_plan(job, needs, f"{self.work_dir.rstrip('/')}/{job}/report.json", verifies)
        self.echo(f"clone job {job}: {len(plan_obj.copies)} copies ({sum(t.bytes for t in plan_obj.copies)} bytes), "
                  f"{len(plan_obj.verifies)} verifies")
        return plan_obj

    def _execute(self, plan_obj: ClonePlan, kind: str) -> CloneReport:
        report = self.runner(plan_obj)
        metrics.clone_done(report, kind=kind)
        return report

    def _depth(self) -> int:
        """How many clone batches run at once: what the runner takes (``concurrent_plans``: the
        local runner's worker processes go from one batch to the next without waiting for the
        catalog), or two with ``overlap_batches``; one otherwise (a spark-submit per batch)."""
        if self.options.overlap_batches is False:
            return 1
        depth = getattr(self.runner, "concurrent_plans", 1)
        return max(depth, 2) if self.options.overlap_batches else depth

    def _clone_round(self, job: JobView, needs: Sequence[CloneNeed]) -> tuple[int, int]:
        """Clone ``needs`` in batches (:func:`clone_batches`), registering each batch's clones as
        it ends: progress (bytes copied of planned: percent, time left) moves while a lost disk is
        repaired, and a killed run keeps every finished batch. With a depth of two or more
        (:meth:`_depth`) the next batches copy while one is registered, so the catalog is off the
        copies' path; either way a batch is registered only after its report, in order, no batch
        starts once one has failed, and the failure ends the round with every batch before it
        registered."""
        added = copied = 0
        o = self.options
        batches = clone_batches(needs, o.clone_batch_bytes, o.clone_batch_replicas, o.store_copy_batch_replicas)
        depth, label = min(len(batches), self._depth()), f"balance-{job.id}"
        if depth <= 1:
            for batch in batches:
                n, size = self._register(job, self._run_plan(label, batch))
                added, copied = added + n, copied + size
            return added, copied
        submit = getattr(self.runner, "submit", None)  # the local runner queues plans itself, in order
        with nullcontext() if submit else ThreadPoolExecutor(depth, thread_name_prefix="colocate-clone") as copier:
            running: deque = deque()

            def start(k: int) -> None:
                if k < len(batches) and not any(f.done() and f.exception() is not None for f in running):
                    plan_obj = self._plan_of(label, batches[k])
                    running.append(submit(plan_obj) if submit else copier.submit(self.runner, plan_obj))

            for k in range(depth):
                start(k)
            try:
                for k in range(len(batches)):
                    report = running.popleft().result()  # a failure ends the round here
                    metrics.clone_done(report, kind="balance")
                    start(k + depth)
                    n, size = self._register(job, report)
                    added, copied = added + n, copied + size
            finally:
                for future in running:
                    future.cancel()
        return added, copied

    def _register(self, job: JobView, report: CloneReport) -> tuple[int, int]:
        n, stale = self.catalog.balance.register_clones(job.id, report.copies)
        for path in stale:
            fs.delete_tree(path)
        for c in (c for c in report.copies if not c.ok):
            self.echo(f"job {job.id}: clone to {c.path} failed: {c.error}")
            self._clone_failures.setdefault(job.id, {}).update({} if c.source_bad else {c.backend_id: c.error or "?"})
        return n, sum(c.bytes for c in report.copies if c.ok)

    # -- steps ------------------------------------------------------------------------------

    def _paused_by_flags(self, job: JobView) -> str | None:
        flags = self.catalog.flags()
        whys = {mv["why"] for mv in job.plan.get("moves", [])}
        if flags.get("disable_colocate_relocate") and whys & {"relocate", "decommission"}:
            return "disable_colocate_relocate is set"
        if flags.get("disable_colocate_balance") and "balance" in whys:
            return "disable_colocate_balance is set"
        return None

    def _comeback(self, job: JobView) -> tuple[JobView, list[str], dict]:
        """A relocated backend that is alive again before much of it was copied keeps its buckets.
        Returns the job (revised or not), what was noted, and the backends' health it read."""
        moves = job.plan.get("moves", [])
        health = {b.id: b for b in self.catalog.health.backends(relocate_delay=self.options.delay)}
        back = {mv["src"] for mv in moves if mv["why"] == "relocate" and health.get(mv["src"]) is not None
                and health[mv["src"]].alive}
        if not back:
            return job, [], health
        progress = self.catalog.balance.move_progress(job.id)
        new_map = [list(r) for r in job.plan["new_map"]]
        keep = list(range(len(moves)))
        notes = []
        for be in sorted(back):
            mine = [i for i, mv in enumerate(moves) if mv["src"] == be and mv["why"] == "relocate"]
            copied = sum(progress[i][0] for i in mine)
            total = sum(progress[i][1] for i in mine)
            share = copied / total if total else 0.0
            if share >= self.options.comeback_fraction:
                notes.append(f"backend {health[be].name} is back but {share:.0%} of its relocation is copied: continuing")
                continue
            for i in mine:
                mv = moves[i]
                new_map[mv["bucket_seq"]][mv["index"]] = be
                keep.remove(i)
            notes.append(f"backend {health[be].name} came back after {share:.0%} of its relocation was copied: "
                         f"it keeps its {len(mine)} bucket replicas; partial copies are dropped")
        for n in notes:
            self.echo(f"job {job.id}: {n}")
        if len(keep) < len(moves):
            job = self.catalog.balance.revise(job.id, new_map, [moves[i] for i in keep], "; ".join(notes))
        return job, notes, health

    def _cancelled(self, job: JobView, out: JobOutcome, reason: str) -> JobOutcome:
        job = self.catalog.balance.cancel(job.id, f"{reason}: planned again")
        out.state, out.step, out.notes = job.state, job.step, [reason]
        self.echo(f"job {job.id} ({job.group}) cancelled: {reason}")
        return out

    def run_job(self, job: JobView) -> JobOutcome:
        """Take one job from wherever it stopped to the end (or as far as it can go now)."""
        opts = self.options
        warm = getattr(self.runner, "warm", None)
        if warm is not None and job.step in ("planned", "unstable") and planned_bytes(job) >= WARM_MIN_BYTES:
            warm()  # the clone workers start while the catalog plans the clones
        out = JobOutcome(job.id, job.group, job.kind, job.state, job.step, len(job.plan.get("moves", [])))
        if job.step in ("planned", "unstable"):
            paused = self._paused_by_flags(job)
            if paused:
                job = self.catalog.balance.cancel(job.id, f"{paused}: the map was not switched")
                out.state, out.notes = job.state, [f"cancelled before its switch: {paused}"]
                self.echo(f"job {job.id} ({job.group}): {out.notes[0]}")
                return out
        if job.step == "planned":
            job = self.catalog.balance.begin(job.id)
            self.on_step("unstable", job.id)
        if job.step == "unstable":
            job, notes, health = self._comeback(job)
            out.notes += notes
            out.moves = len(job.plan.get("moves", []))
            gone = sorted({be for row in job.plan["new_map"] for be in row if be not in health or health[be].unavailable})
            if gone:
                names = ", ".join(health[be].name if be in health else str(be) for be in gone)
                reason = f"backend(s) {names} of its target map became unavailable"
                return self._cancelled(job, out, reason)
            switched = False
            blocked = []
            all_cloned = False  # the last round registered every need, none blocked: switch_map checks the rest
            for _ in range(opts.max_rounds):
                if not all_cloned:
                    needs, blocked = self.catalog.balance.clone_needs(job.id)
                    down = [b for b in blocked if b.target_down]
                    if down:
                        reason = f"target backend of {down[0].table}/{down[0].partition} bucket {down[0].bucket_seq} is not alive"
                        return self._cancelled(job, out, reason)
                    if needs:
                        added, size = self._clone_round(job, needs)
                        out.cloned, out.bytes = out.cloned + added, out.bytes + size
                        self.on_step("cloned", job.id)
                        all_cloned = added == len(needs) and not blocked
                        continue  # clone again until nothing is missing (failed copies retry)
                    if blocked:
                        break
                all_cloned = False
                result = self.catalog.balance.switch_map(job.id)
                if result.cancelled:
                    out.state, out.notes = "cancelled", [result.reason]
                    return out
                if result.switched:
                    switched = True
                    self.on_step("switched", job.id)
                    break
            if not switched:
                job = self.catalog.jobs.get(job.id)
                out.state, out.step = job.state, job.step
                out.notes += [f"{b.table}/{b.partition} bucket {b.bucket_seq} -> backend {b.backend_id}: {b.why}"
                              for b in blocked[:5]]
                out.notes += balance_outcome.clone_failure_notes(self._clone_failures.pop(job.id, {}), self.catalog)
                out.notes.append("not switched yet: the next run continues")
                return out
            job = replace(job, step="switched")  # as recorded by switch_map, without reading it back
        if job.step == "switched":
            job = self._finish(job, out)
        if job.step == "finished" and job.state == "running":  # the group is stable: the marks of what it left
            dropping = self.catalog.balance.close(job.id, grace=opts.grace)
            self.echo(f"job {job.id} ({job.group}) closed: {dropping} replicas the map no longer names are dropped "
                      f"after the grace period")
            job = self.catalog.jobs.get(job.id)
        out.state, out.step = job.state, job.step
        return out

    def _finish(self, job: JobView, out: JobOutcome) -> JobView:
        """After the switch: clone the writes that landed meanwhile until the group is whole."""
        for _ in range(self.options.max_rounds):
            result = self.catalog.balance.finish(job.id, grace=self.options.grace)
            if result.done:
                self.on_step("finished", job.id)
                if result.health is not None:
                    self.echo(f"job {job.id} ({job.group}) finished; group "
                              f"{'stable' if result.health.stable else 'UNSTABLE: ' + (result.health.reason or '')}")
                break
            needs, blocked = self.catalog.balance.clone_needs(job.id)
            if not needs:
                out.notes += [f"{b.table}/{b.partition} bucket {b.bucket_seq}: {b.why}" for b in blocked[:5]]
                break
            added, size = self._clone_round(job, needs)
            out.cloned, out.bytes = out.cloned + added, out.bytes + size
            self.on_step("cloned", job.id)
        return self.catalog.jobs.get(job.id)

    def drop_expired(self) -> int:
        """Delete the files of replicas whose grace period is over, then their rows."""
        if not (items := self.catalog.balance.take_droppable()):
            return 0
        self.on_step("dropping", None)
        gone, left = delete_replicas(self.catalog, items)
        for path, reason in left:  # stays 'deleting': the next run tries again
            self.echo(f"cannot delete {path}: {reason}")
        n = self.catalog.balance.forget_replicas(gone)
        self.on_step("dropped", None)
        self.echo(f"dropped {n} redundant replicas")
        return n

    def verify(self) -> list[str]:
        """Re-hash replicas; mark the ones whose bytes changed ``bad`` (repaired by this run)."""
        if not (needs := self.catalog.health.replicas_to_verify(groups=self.options.groups, limit=self.options.verify_limit)):
            return []
        report = self._run_plan("verify", [], [VerifyTask(n.replica_id, n.backend_id, n.path, n.checksum, n.bytes) for n in needs])
        bad = self.catalog.health.record_verify(report.verifies)
        follow_all(self.catalog, changed=bad)  # Iceberg tables name another replica of the bad ones until repaired
        for path in bad:
            self.echo(f"replica {path} failed its checksum: marked bad, it is repaired from a good copy")
        return bad

    def run(self) -> dict:
        """Verify (optional) → drop expired → resume running jobs → plan and run new ones → drop →
        finish decommissions → check every group in scope."""
        opts = self.options
        summary: dict = {"jobs": [], "plans": [], "verified_bad": [], "dropped": 0, "decommissioned": []}
        scope = group_ids(self.catalog, opts.groups)
        if opts.relocate_now:
            self.relocate_now()
        if opts.verify:
            summary["verified_bad"] = self.verify()
        summary["dropped"] += self.drop_expired()
        for job in self.catalog.balance.active():
            if scope is None or job.grp_id in scope:
                self.echo(f"resuming balance job {job.id} ({job.group}) at step {job.step}")
                summary["jobs"].append(self.run_job(job))
        for p in plan(self.catalog, opts):
            if p.needs_job or p.notes:
                summary["plans"].append(p)
            if not p.needs_job:
                continue
            try:
                job = self.catalog.balance.create(p.grp_id, p.kind, p.to_plan())
            except Conflict as exc:  # another run got there first, or the map moved: next run
                self.echo(f"group {p.full_name}: {exc}")
                continue
            self.echo(f"balance job {job.id} ({p.full_name}): {p.kind}, {len(p.moves)} moves, {p.bytes} bytes")
            for line in describe_plans([p], self.backend_names)[1:]:  # its plan before it runs, not after "finished"
                self.echo(f"plan: {line.strip()}")
            self.on_step("planned", job.id)
            summary["jobs"].append(self.run_job(job))
        summary["dropped"] += self.drop_expired()
        summary["decommissioned"] = self.catalog.health.finish_decommissions()
        follow_all(self.catalog, changed=summary["jobs"])  # the replicas a repair or balance leaves reads preferring
        refs = list(opts.groups) if opts.groups else [g.group_id for g in self.catalog.groups.list()]
        summary["groups"] = [self.catalog.health.check_group(ref).to_dict() for ref in refs]
        # a run that moved nothing because a backend is down for less than the delay says so
        summary["waiting"] = waiting_to_relocate(self.catalog.health.backends(relocate_delay=opts.delay),
                                                 opts.delay, self.catalog.now(), opts.relocate_delay_source)
        summary["pending"] = self.pending()
        return summary

    def pending(self, *, ignore_relocate_now: bool = False) -> list[PendingRelocation]:
        """The relocations of the groups in scope that wait for their delay (none with
        ``relocate_now``, unless ``ignore_relocate_now``: what it starts early)."""
        return [] if self.options.relocate_now and not ignore_relocate_now else pending_relocations(
            self.catalog, self.options.relocate_delay, group_ids(self.catalog, self.options.groups))

    def relocate_now(self) -> list[PendingRelocation]:
        """Record, once per backend it concerns, that an operator started a relocation before its
        delay was over (``balance.relocate_now``, with the catalog's actor: the task in Airflow,
        the OS user or ``COLOCATE_ACTOR`` in the CLI), so the event log says who did not wait."""
        waiting = self.pending(ignore_relocate_now=True)
        if not waiting:
            self.echo("relocate_now: no backend of the groups in scope is waiting for its relocate delay")
        for p in waiting:
            self.catalog.tx(lambda s, p=p: self.catalog.event(
                s, "balance.relocate_now", p.backend, down_since=p.down_since.isoformat(timespec="seconds"),
                delay_minutes=round(p.delay.total_seconds() / 60, 2),
                would_start_at=p.starts_at.isoformat(timespec="seconds"), groups=list(p.groups)))
            self.echo(f"relocate_now: relocating {p.backend}'s buckets now (down since "
                      f"{p.down_since:%H:%M} UTC; the delay would have waited until {p.starts_at:%H:%M} UTC), "
                      f"requested by {self.catalog.actor}")
        return waiting


def summary_json(summary: dict) -> dict:
    """The run summary as plain JSON (XCom, ``--json``)."""
    return {
        "jobs": [vars(j) for j in summary["jobs"]],
        "plans": [p.summary() for p in summary["plans"]],
        "verified_bad": summary["verified_bad"],
        "dropped": summary["dropped"],
        "decommissioned": summary["decommissioned"],
        "groups": summary.get("groups", []),
        "waiting": summary.get("waiting", []),
        "pending": [p.to_dict() for p in summary.get("pending", [])],
    }


__all__ = ["Balancer", "BalanceOptions", "JobOutcome", "Runner", "describe_plans", "plan",
           "session_runner", "summary_json"]
