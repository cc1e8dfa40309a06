"""Failover inside a query: a bucket replica that fails while Spark reads it is read from another.

The registration check (:func:`airflow_colocate.spark.register.check_candidates`) sees what a
listing can: a missing, short or unknown file. What only reading shows — a page whose CRC fails, a
footer that is not parquet, a file deleted after the check, rows of another bucket (the view's
guard) — fails the query. :func:`run_with_failover` then finds the replica the error names (its
directory in Spark's message, or the guard's table/partition/bucket with the replica the job
inserted, :func:`airflow_colocate.spark.register.name_the_replica`), drops it from the bucket's
candidates, and runs the whole attempt again: a fresh registration that reads that bucket from its
next good replica, and the query from the start. An attempt returns or writes its rows only when it
succeeded, so no row is returned twice (ARCHITECTURE.md, "Failover inside a query"). The replicas
that failed travel back as :class:`BadReplica` for the control plane to mark (this module, like
every Spark job, never touches the catalog). Only when a bucket has no candidate left does the query
fail, naming the bucket and every replica tried with what was wrong with it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from airflow_colocate.core.contract import BadReplica, ReadReplica, ReadTable
from airflow_colocate.spark import replica_paths
from airflow_colocate.spark.failures import first_line, jvm_error
from airflow_colocate.spark.register import GUARD_PREFIX, UnreadableBuckets

log = logging.getLogger("airflow_colocate.spark.failover")

T = TypeVar("T")

# What a replica's bytes look like when they fail on read (Spark's and parquet-mr's messages). An
# error naming a replica's file without one of these (an executor lost, a full shuffle disk) is not
# the replica's fault and fails the query as before.
READ_FAILURE = re.compile(
    r"FAILED_READ_FILE|CANNOT_READ_FILE_FOOTER|FileNotFoundException|CRC checksum|ParquetDecodingException"
    r"|is not a Parquet file|Could not read footer|EOFException|expected magic number|does not exist"
    r"|holds a row of bucket|can not read class org\.apache\.parquet", re.I)


# The view's guard (spark.register.bucket_guard), with the replica the job inserted or without it.
_GUARD = re.compile(re.escape(GUARD_PREFIX) + r"\S+(?: partition .*?)? bucket \d+(?: \(replica [^)]*\))? holds a row of "
                    r"bucket \d+(?: \(a corrupt replica\))?")


class NoGoodReplica(UnreadableBuckets):
    """Every replica of a bucket failed (on the listing check or while read): the query stops.
    ``bad``: every replica found bad on the way, for the control plane."""


@dataclass
class Failover:
    """What the failover learnt: the replicas found bad while read (for the report), and one line
    per failed attempt (for the log)."""

    bad: list[BadReplica] = field(default_factory=list)
    attempts: int = 0
    lines: list[str] = field(default_factory=list)


def _needle(path: str) -> str:
    """A replica directory as it appears inside any spelling of its files' paths in an error
    (``file:///r/b00001/part-0.parquet``, ``colocatefile:///r/b00001/…``, ``/r/b00001/…``)."""
    return path.split("://", 1)[-1].lstrip("/").rstrip("/") + "/"


def _chain(exc: BaseException) -> str:
    """The text of ``exc`` and of every error it was raised from."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def reason_of(exc: BaseException, text: str) -> str:
    """The one line recorded as the replica's reason: the guard's line, else Spark's own message
    with its root cause (``[FAILED_READ_FILE.NO_HINT] … CRC checksum verification failed``)."""
    m = _GUARD.search(text)
    if m is not None:
        return f"read failed: {m.group(0)}"
    line = None
    e: BaseException | None = exc
    while e is not None and line is None:
        line = jvm_error(e)
        e = e.__cause__
    return f"read failed: {line or first_line(exc)}"[:1000]


Key = tuple[int, int, int]  # (table index, partition index, bucket)


def failed_replica(exc: BaseException, tables: list[ReadTable]) -> tuple[Key, ReadReplica, str] | None:
    """The candidate replica whose read failed the query, with the reason; None when the error is
    not a read failure of a replica these tables register (it is not ours to fail over)."""
    text = _chain(exc)
    if not READ_FAILURE.search(text):
        return None
    best: tuple[int, Key, ReadReplica] | None = None
    for ti, table in enumerate(tables):
        for pi, part in enumerate(table.partitions):
            for b, candidates in enumerate(part.candidates):
                for replica in candidates:
                    at = text.find(_needle(replica.path))
                    if at < 0:
                        at = text.find(replica.path.rstrip("/") + ")")  # the guard's "(replica <dir>)"
                    if at >= 0 and (best is None or at < best[0]):
                        best = (at, (ti, pi, b), replica)
    if best is None:  # a replica set's path (spark.replica_paths) names its replicas inside its token
        for rid in replica_paths.first_replicas(text):
            best = next(((0, (ti, pi, b), r) for ti, table in enumerate(tables) for pi, part in enumerate(table.partitions)
                         for b, candidates in enumerate(part.candidates) for r in candidates if r.replica_id == rid), None)
            if best is not None:
                break
    if best is None:
        return None
    return best[1], best[2], reason_of(exc, text)


def without(tables: list[ReadTable], excluded: set[int]) -> list[ReadTable]:
    """``tables`` with the replicas ``excluded`` (ids) dropped from every bucket's candidates and,
    where one was the bucket's first choice, the next candidate chosen in its place."""
    if not excluded:
        return tables
    out = []
    for table in tables:
        parts = []
        for part in table.partitions:
            if not part.candidates:
                parts.append(part)
                continue
            candidates = [[r for r in c if r.replica_id not in excluded] for c in part.candidates]
            paths = [(c[0].path if c else path) if path else "" for path, c in zip(part.bucket_paths, candidates)]
            parts.append(replace(part, candidates=candidates, bucket_paths=paths))
        out.append(replace(table, partitions=parts))
    return out


_KINDS = [("checksum", "checksum"), ("holds a row of bucket", "wrong_bucket"), ("missing file", "missing"),
          ("FileNotFound", "missing"), ("does not exist", "missing"), ("bytes, the catalog recorded", "size"),
          ("unknown file", "unknown_file"), ("footer", "footer"), ("not a Parquet file", "footer"),
          ("magic number", "footer")]


def failure_kind(reason: str) -> str:
    """A bad replica's reason as one of a few values, for a metric's tag (series must not explode)."""
    lower = reason.lower()
    return next((kind for text, kind in _KINDS if text.lower() in lower), "read")


def _lost(table: ReadTable, pi: int, bucket: int, tried: list[str]) -> str:
    return (f"cannot read {table.table or table.name} partition {table.partitions[pi].value} bucket {bucket}: every "
            f"replica failed, so the query stops instead of returning wrong rows; replicas tried: {'; '.join(tried)}. "
            f"The bad replicas are marked bad; run 'colocate balance' to repair them from a good copy, or rewrite "
            f"the partition if none is left")


def run_with_failover(tables: list[ReadTable], attempt: Callable[[list[ReadTable]], T],
                      *, state: Failover | None = None) -> tuple[T, Failover]:
    """Run ``attempt(tables)`` (register, run the query, return its result) until it succeeds or a
    bucket has no replica left; after a read failure of a replica the error names, again with that
    replica dropped. ``attempt`` must not have returned or written rows when it raises (a retry
    runs the whole query again). Raises :class:`NoGoodReplica` (``bad``: every replica found bad)
    when a bucket ran out of replicas, and anything else unchanged."""
    state = state or Failover()
    excluded: set[int] = set()
    tried: dict[Key, list[str]] = {}
    while True:
        current = without(tables, excluded)
        state.attempts += 1
        try:
            return attempt(current), state
        except UnreadableBuckets as exc:  # the listing check ran out of replicas after a failover
            if not state.bad:
                raise
            earlier = "; ".join(f"backend {b.backend_id} ({b.path}): {b.reason}" for b in state.bad)
            raise NoGoodReplica(f"{exc} (earlier in this query, while read: {earlier})", [*state.bad, *exc.bad]) from exc
        except Exception as exc:
            hit = failed_replica(exc, current)
            if hit is None:
                if state.bad:  # what was learnt before must reach the control plane
                    exc.bad = [*state.bad, *getattr(exc, "bad", [])]  # type: ignore[attr-defined]
                raise
            (ti, pi, b), replica, reason = hit
            table = current[ti]
            state.bad.append(BadReplica(replica_id=replica.replica_id, table=table.table or table.name,
                                        partition=table.partitions[pi].value, bucket_seq=b,
                                        backend_id=replica.backend_id, path=replica.path, reason=reason))
            excluded.add(replica.replica_id)
            tried.setdefault((ti, pi, b), []).append(f"backend {replica.backend_id} ({replica.path}): {reason}")
            line = (f"{table.table or table.name} partition {table.partitions[pi].value} bucket {b}: replica "
                    f"{replica.path} failed on read ({reason}); ")
            left = without([table], excluded)[0].partitions[pi].candidates[b]
            if not left:
                log.warning(line + "no replica left")
                raise NoGoodReplica(_lost(table, pi, b, tried[(ti, pi, b)]), list(state.bad)) from exc
            state.lines.append(line + f"reading it from {left[0].path} and running the query again")
            log.warning(state.lines[-1])


__all__ = ["Failover", "NoGoodReplica", "failed_replica", "failure_kind", "run_with_failover", "without"]
