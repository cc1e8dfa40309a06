"""What a balance run did and what it leaves waiting, in one line a person reads; how far a running
balance job has come (:func:`job_progress`).

A repair inside the relocate delay moves nothing, on purpose: a backend that is down for less than
the delay may come back, and relocating it would re-clone everything it holds for a blip. A run
that says only "success" then looks as if it had repaired the group. So every run ends with an
outcome line (the task log, the XCom report, the CLI) and, when nothing at all moved while a
relocation waits, the maintenance DAG's balance task is *skipped* with that line, e.g.
``nothing moved: relocation of be2's buckets starts at 14:32 UTC (delay 30 min); trigger with
relocate_now to start it now``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from airflow_colocate.model.views import JobView
from airflow_colocate.core.sizes import human_bytes
from airflow_colocate.core.times import short_time, utc
from airflow_colocate.jobs.health import _minutes

DAG_HINT = "trigger with relocate_now"
CLI_HINT = "run with --relocate-now"


@dataclass(frozen=True)
class PendingRelocation:
    """A down backend whose buckets (of ``groups``) are relocated only once its delay is over."""

    backend: str
    down_since: datetime
    starts_at: datetime
    delay: timedelta
    groups: tuple[str, ...]
    paused: bool = False  # disable_colocate_relocate is set: it will not start by itself

    def to_dict(self) -> dict:
        return {"backend": self.backend, "down_since": self.down_since.isoformat(timespec="seconds"),
                "starts_at": self.starts_at.isoformat(timespec="seconds"),
                "delay_minutes": round(self.delay.total_seconds() / 60, 2), "groups": list(self.groups),
                "paused": self.paused}

    @classmethod
    def from_dict(cls, d: dict) -> PendingRelocation:
        return cls(d["backend"], datetime.fromisoformat(d["down_since"]), datetime.fromisoformat(d["starts_at"]),
                   timedelta(minutes=d["delay_minutes"]), tuple(d["groups"]), bool(d.get("paused")))


def pending_relocations(catalog, delay: timedelta, groups: Collection[int] | None = None) -> list[PendingRelocation]:
    """The down backends that a group in scope (``groups``: group ids, None = all) still names and
    whose relocation waits for ``delay``. A backend that holds no bucket of those groups is left
    out: nothing of theirs would move when its delay ends. The catalog's health view is in UTC already."""
    named: dict[int, list[str]] = {}
    for g in catalog.groups.list():
        if groups is None or g.grp_id in groups:
            for be in {be for row in g.bucket_map for be in row}:
                named.setdefault(be, []).append(g.full_name)
    paused = bool(catalog.flags().get("disable_colocate_relocate"))
    return [PendingRelocation(b.name, b.state_since, b.state_since + delay, delay,
                              tuple(sorted(named[b.id])), paused)
            for b in catalog.health.backends(relocate_delay=delay)
            if b.state == "down" and not b.unavailable and b.id in named]


def pending_line(pending: Sequence[PendingRelocation], now: datetime, hint: str = DAG_HINT) -> str:
    """``relocation of be2's buckets starts at 14:32 UTC (delay 30 min); trigger with relocate_now
    to start it now`` (more backends: ``…, of be3's at 14:40 UTC; …``)."""
    parts = []
    for i, p in enumerate(pending):
        whose = f"relocation of {p.backend}'s buckets" if i == 0 else f"of {p.backend}'s"
        if p.paused:
            parts.append(f"{whose} waits: disable_colocate_relocate is set")
        else:
            parts.append(f"{whose} {'starts ' if i == 0 else ''}at {short_time(p.starts_at, now)}"
                         + ("" if i else f" (delay {_minutes(p.delay)})"))
    return f"{', '.join(parts)}; {hint} to start it now"


def did_work(summary: dict) -> bool:
    """Whether a run changed anything: a job planned or resumed, a replica dropped or found bad, a
    decommission finished."""
    return bool(summary.get("jobs") or summary.get("dropped") or summary.get("verified_bad")
                or summary.get("decommissioned"))


def outcome_line(summary: dict, now: datetime, hint: str = DAG_HINT) -> str:
    """The one line that says what a run did and what still waits: ``nothing moved: <pending>``,
    ``done: 1 balance job (8 replicas cloned, 4.2 KiB); pending: <pending>``, or ``nothing to do``.
    Takes a :meth:`Balancer.run` summary or its JSON (``summary_json``)."""
    pending = [p if isinstance(p, PendingRelocation) else PendingRelocation.from_dict(p)
               for p in summary.get("pending") or []]
    if not did_work(summary):
        if pending:
            return f"nothing moved: {pending_line(pending, now, hint)}"
        return "nothing to do: no group in scope needs a repair or a move"
    jobs = [j if isinstance(j, dict) else vars(j) for j in summary.get("jobs") or []]
    done = []
    if jobs:
        done.append(f"{len(jobs)} balance job{'s' if len(jobs) != 1 else ''} ({sum(j['cloned'] for j in jobs)} "
                    f"replicas cloned, {human_bytes(sum(j['bytes'] for j in jobs))})")
    if summary.get("verified_bad"):
        done.append(f"{len(summary['verified_bad'])} replicas found bad")
    if summary.get("dropped"):
        done.append(f"{summary['dropped']} redundant replicas dropped")
    if summary.get("decommissioned"):
        done.append(f"decommissioned {', '.join(summary['decommissioned'])}")
    line = "done: " + "; ".join(done)
    return f"{line}; pending: {pending_line(pending, now, hint)}" if pending else line


__all__ = ["CLI_HINT", "DAG_HINT", "PendingRelocation", "did_work", "job_progress", "outcome_line", "pending_line",
           "pending_relocations", "planned_bytes"]


def planned_bytes(job: JobView) -> int:
    """The bytes a balance job's moves plan to copy (0 without moves)."""
    return sum(int(mv.get("bytes") or 0) for mv in (job.plan or {}).get("moves") or [] if isinstance(mv, dict))


def job_progress(job: JobView, now) -> dict:
    """A balance job's progress as the CLI and the page show it: bytes copied of the bytes its
    moves plan, the percent, and the time left at the rate so far (elapsed since the job was
    created); None where it cannot be known (no moves planned, nothing copied yet)."""
    progress = job.progress or {}
    planned = planned_bytes(job)
    copied = int(progress.get("bytes") or 0) if isinstance(progress.get("bytes"), (int, float)) else 0
    finished = progress.get("step") == "finished" or job.state in ("done", "committed")
    percent = 100.0 if finished else (round(min(100.0, 100.0 * copied / planned), 1) if planned else None)
    eta = None
    if not finished and planned and copied and job.created_at is not None:
        elapsed = (utc(now) - utc(job.created_at)).total_seconds()
        eta = round(max(0.0, elapsed * (planned - copied) / copied), 1) if elapsed > 0 else None
    elif finished:
        eta = 0.0
    return {"planned_bytes": planned, "copied_bytes": copied, "percent": percent, "eta_seconds": eta}


def clone_failure_notes(failures: dict[int, str], catalog) -> list[str]:
    """One line per target backend whose clones kept failing, naming it and what to do: a full
    disk is the operator's to fix, and the job waits for it rather than moving elsewhere."""
    names = {b.id: b.name for b in catalog.backends.list()} if failures else {}
    notes = []
    for backend_id, error in sorted(failures.items()):
        name = names.get(backend_id, str(backend_id))
        todo = (f"free space on {name} (or decommission it)" if "no space left on device" in error.lower()
                else f"check backend {name}")
        notes.append(f"clones to backend {name} failed: {error}; {todo}, then run balance again")
    return notes
