"""The directories balance jobs clone new replicas into, recorded before the copy (``clone_targets``).

A clone's files land under their final names before the catalog registers the replica (written in
place in a directory the clone made, or renamed there once durable). A job killed in between
leaves a directory no replica row names. The next round of the same job clones there again, but
when a later plan no longer needs that replica (the partition was dropped, the job was cancelled or
revised, a decommission was cancelled) nothing would ever name those files: gc takes them from here
(:func:`garbage`) once their job has ended, as Doris drops a failed clone task's replica.

The protocol with a balance that clones into the same directory again, under serializable
transactions (PostgreSQL) or one writer (SQLite):

- :func:`note` (in :meth:`BalanceJobs.clone_needs`, before the copy) records the job's targets and
  holds back any directory gc has claimed (``removing``): that replica is cloned in a later round.
- :func:`garbage` claims only targets of ended jobs that no replica row and no running job's target
  names; the files are deleted after that transaction, and :func:`forget` drops the rows after.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.summary import chunks, fetch, replica_keys
from airflow_colocate.core.times import utc
from airflow_colocate.model.views import ACTIVE

T = m.CloneTarget
Target = tuple[int, int, int, int, str]  # (partition, version, bucket seq, backend, directory)
HELD_BACK = "gc is removing the files of an earlier, abandoned clone there: cloned once it has"


def note(s: Session, job_id: int, targets: list[Target], now: datetime) -> set[str]:
    """Record ``targets`` for ``job_id`` (each directory once per job) before the job copies;
    returns the directories gc is removing, which the job must not clone into now."""
    if not targets:
        return set()
    removing = set(s.scalars(select(T.path).where(T.state == "removing")))
    mine = set(s.scalars(select(T.path).where(T.job_id == job_id)))
    new = [{"job_id": job_id, "partition_id": p, "version": v, "bucket_seq": seq, "backend_id": be, "path": path,
            "state": "planned", "created_at": now}
           for p, v, seq, be, path in targets if path not in mine and path not in removing]
    if new:
        s.execute(m.CloneTarget.__table__.insert(), new)
    return {t[4] for t in targets} & removing


def garbage(s: Session, now: datetime, grace: timedelta, *, claim: str | None) -> list[tuple[int, int, str]]:
    """(target id, backend id, directory) of every abandoned clone: a target whose job has ended
    (over ``grace`` ago: a cluster may still run a killed driver's tasks) and that no replica row
    and no running job's target names. Targets a replica row names (registered clones) and those a
    running job has taken over are forgotten here; the abandoned ones are marked ``removing`` by
    the gc run whose token is ``claim`` (None: a dry run, which claims nothing) until
    :func:`forget`. A running job's targets are not read: a repair's thousands wait for its end."""
    J = m.Job
    ended = list(fetch(s, select(T.id, T.partition_id, T.version, T.bucket_seq, T.backend_id, T.path, T.state,
                                 J.updated_at).outerjoin(J, J.id == T.job_id)
                       .where(or_(J.id.is_(None), J.state != ACTIVE))))
    if not ended:
        return []
    named: dict[tuple[int, int, int, int], str] = {}
    running: set[str] = set()
    R = m.Replica
    for chunk in chunks(sorted({(r.partition_id, r.version, r.bucket_seq, r.backend_id) for r in ended})):
        named.update(((p, v, seq, be), path) for p, v, seq, be, path in fetch(
            s, select(R.partition_id, R.version, R.bucket_seq, R.backend_id, R.path)
            .where(replica_keys(s, ("partition_id", "version", "bucket_seq", "backend_id"), chunk))))
    for chunk in chunks(sorted({r.path for r in ended})):
        running.update(s.scalars(select(T.path).join(J, J.id == T.job_id).where(J.state == ACTIVE, T.path.in_(chunk))))
    done, out = [], []
    for r in ended:
        if named.get((r.partition_id, r.version, r.bucket_seq, r.backend_id)) == r.path or r.path in running:
            done.append(r.id)  # a replica row, or a running job's own target, owns the directory now
        elif r.state == "removing" or r.updated_at is None or utc(r.updated_at) <= now - grace:
            out.append((r.id, r.backend_id, r.path))
    forget(s, done)
    if claim is not None:
        for chunk in chunks([i for i, _, _ in out]):
            s.execute(update(T).where(T.id.in_(chunk)).values(state="removing", claimed_by=claim)
                      .execution_options(synchronize_session=False))
    return out


def forget(s: Session, ids: list[int]) -> None:
    for chunk in chunks(sorted(ids)):
        s.execute(delete(T).where(T.id.in_(chunk)).execution_options(synchronize_session=False))


def release(s: Session, ids: list[int], claim: str) -> None:
    """Undo this gc run's claim on folders it did not delete (their backend unreachable, a delete
    failed): a balance may clone there again now rather than wait for the next gc. A folder another
    gc run has claimed since stays claimed: that run may be deleting it."""
    for chunk in chunks(sorted(ids)):
        s.execute(update(T).where(T.id.in_(chunk), T.state == "removing", T.claimed_by == claim)
                  .values(state="planned", claimed_by=None).execution_options(synchronize_session=False))


def new_claim() -> str:
    return uuid.uuid4().hex


__all__ = ["HELD_BACK", "Target", "forget", "garbage", "new_claim", "note", "release"]
