"""Whether a group is stable, and why not: the reasons a check finds, how it records them, and how
a replica found bad makes its group unstable. Shared by the health checks, forced maps and balance
jobs, which all leave a group in a state these functions explain."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone

from sqlalchemy import event, select
from sqlalchemy.orm import Session, object_session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.buckets import Buckets, lacking_rows, load_buckets
from airflow_colocate.catalog.rows import active_job, full_name, map_of
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.catalog.summary import tracking
from airflow_colocate.model.views import MAX_REASONS, GroupHealth, Reason, group_ref, summary
from airflow_colocate.core.times import utc


def bind_clock(db: CatalogSession) -> None:
    """Let every session of ``db`` tell the catalog's clock (``session.info["now"]``), so that
    :func:`_stable_set` stamps ``unstable_since`` with the time the change's events carry (a test's
    clock, not the wall clock)."""
    db._sessions.configure(info={"now": db.now})


@event.listens_for(m.ColocateGroup.stable, "set", active_history=True)
def _stable_set(g: m.ColocateGroup, value, old, initiator) -> None:
    """``unstable_since`` follows ``stable`` wherever it is assigned (a check, a mark, a bad
    replica, a balance job, a forced map, a write missing replicas, a table joining): set when the
    group turns unstable, kept while it stays so, cleared when it turns stable. One listener, so no
    code path that flips the flag can forget the time. A group still unstable from before 0007
    (false -> false, no time) keeps None: the metrics then read the time from the event log."""
    if value:
        g.unstable_since = None
    elif old is not False:  # True, None, or never set (a new row)
        s = object_session(g)
        clock = s.info.get("now") if s is not None else None
        g.unstable_since = clock() if clock is not None else datetime.now(timezone.utc)


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


def find_problems(db: CatalogSession, s: Session, g: m.ColocateGroup, *, exclude_job: int | None = None,
                  read: tuple[list[list[int]], dict, Buckets] | None = None) -> tuple[list[Reason], int, bool]:
    """Why the group is not stable: (the first MAX_REASONS reasons, how many problems, whether
    the last computed answer was reused because nothing it reads changed since). ``read``: the
    group's map, the backends' rows and its buckets as the caller read them in this transaction,
    with nothing changed since (a balance job's finish), instead of reading them again."""
    job = active_job(s, g.id, exclude_job)
    if job is not None and job.progress.get("step") == "finished":
        job = None  # its changes are done: what is left marks replicas the map no longer names
    bucket_map, backends, known = read if read is not None else (map_of(s, g.id), None, None)
    backends = backends if backends is not None else {b.id: b for b in s.scalars(select(m.Backend))}
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
            since = utc(b.state_since).strftime("%Y-%m-%d %H:%M UTC")
            add(Reason(f"backend {b.name} is {b.state} since {since} ({b.state_reason or 'no reason given'}): "
                       + _where_buckets_are(b, seqs_of[be], bucket_map, backends), backend=b.name))
    alive = {be for be, b in backends.items() if b.state == "alive"}  # others are reported once above
    bk = known if known is not None else load_buckets(s, g)
    cells = bk.cells(bucket_map, lambda seq, be: be in alive)
    for row in lacking_rows(s, cells, MAX_REASONS - len(reasons)):
        reasons.append(Reason(_problem_text(row.state), table=bk.labels[row.table_id], partition=row.partition,
                              version=row.version, bucket=row.bucket_seq, backend=backends[row.backend_id].name))
    count += sum(bk.deficit(t, seq, be) for t, seq, _, be in cells)
    detail = [asdict(r) for r in reasons]
    if last is None:
        s.add(m.GroupCheck(group_id=g.id, inputs=inputs, problems=count, reasons=detail, computed_at=db.now()))
    else:
        last.inputs, last.problems, last.reasons, last.computed_at = inputs, count, detail, db.now()
    return reasons, count, False


def record_check(db: CatalogSession, s: Session, g: m.ColocateGroup, reasons: list[Reason], count: int,
                  reused: bool = False) -> GroupHealth:
    now = db.now()
    stable = count == 0
    text = summary(reasons, count)
    changed = bool(g.stable) != stable or (g.unstable_reason or None) != text
    if changed:
        db.event(s, "group.check", full_name(g), stable=stable, reason=text,
                    previous_stable=bool(g.stable), previous_reason=g.unstable_reason)
        if bool(g.stable) != stable:
            g.version += 1
    g.stable, g.unstable_reason = stable, text
    g.unstable_detail = [asdict(r) for r in reasons] or None
    g.checked_at = now
    return GroupHealth(group_id=group_ref(g.db_id, g.id), full_name=full_name(g), stable=stable, reasons=tuple(reasons),
                       problems=count, checked_at=now, changed=changed, reused=reused)


def mark_bad(db: CatalogSession, s: Session, marks: Sequence[tuple[m.Replica, str, str]]) -> list[str]:
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
            db.event(s, "replica.bad", r.path, replica_id=r.id, backend_id=r.backend_id, reason=why[:2000])
            t = s.get(m.Table, r.table_id)
            g = s.get(m.ColocateGroup, t.group_id) if t is not None and t.group_id is not None else None
            if g is not None:
                if g.stable:
                    g.version += 1
                g.stable = False
                g.unstable_reason = group_why[:2000]
                g.unstable_detail = [asdict(Reason(group_why[:2000]))]
    return bad
