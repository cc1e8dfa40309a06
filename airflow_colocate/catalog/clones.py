"""Registering a clone job's results in bulk: the rows of a lost disk's repair (thousands of clones
per batch) written with a few statements instead of one ORM object each.

:meth:`BalanceJobs.register_clones <airflow_colocate.catalog.balance_jobs.BalanceJobs.register_clones>`
loads every replica of the buckets the results name as plain rows (:func:`load`), decides in memory
what each result changes, and writes the new rows with one multi-row ``INSERT``, the changed ones
with one ``UPDATE`` by primary key (:func:`write`). The per-bucket summaries
(:mod:`airflow_colocate.catalog.summary`) are kept exact without re-measuring the buckets in SQL
before and after: the loaded rows are every replica of those buckets, so what they contribute
before and after the change is computed from them (:func:`contribution`, the same rule as
``summary.measure``: verified and bad replicas of the visible version count, and a bucket's size is
its largest verified replica) and the difference is added. ``summary.drift`` stays empty (tests).
"""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog import summary

R = m.Replica
Key = tuple[int, int, int, int]  # (partition, version, bucket seq, backend)
_COLUMNS = (R.id, R.table_id, R.partition_id, R.version, R.bucket_seq, R.backend_id, R.state, R.path, R.bytes)
_NAMES = tuple(c.key for c in _COLUMNS)


def load(s: Session, results: list) -> tuple[dict[Key, dict], dict[tuple[int, int], str], dict[int, tuple[int, int]]]:
    """(every replica of the results' buckets as a dict by key, each (partition, version)'s state,
    each partition's (table, visible version)): the few columns a registration reads, in chunked
    ``IN`` queries."""
    buckets = sorted({(r.partition_id, r.version, r.bucket_seq) for r in results})
    versions = {(r.partition_id, r.version) for r in results}
    pids = sorted({r.partition_id for r in results})
    rows: dict[Key, dict] = {}
    if buckets and s.get_bind().dialect.name == "sqlite":
        # the keys as a VALUES table joined through uq_replica, as plain driver SQL: one statement,
        # nothing compiled per call (summary.replica_keys explains why not a row-value IN on SQLite)
        listed = ", ".join(f"({int(p)}, {int(v)}, {int(seq)})" for p, v, seq in buckets)
        found = summary.fetch_sql(s, f"SELECT {', '.join('r.' + R.__table__.c[n].name for n in _NAMES)} "
                                     f"FROM (VALUES {listed}) AS k JOIN replicas AS r ON r.partition_id = k.column1 "
                                     f"AND r.version = k.column2 AND r.bucket_seq = k.column3")
    else:
        found = [r for chunk in summary.chunks(buckets) for r in summary.fetch(
            s, select(*_COLUMNS).where(summary.replica_keys(s, ("partition_id", "version", "bucket_seq"), chunk)))]
    for r in found:
        rows[(r[2], r[3], r[4], r[5])] = dict(zip(_NAMES, r))
    states: dict[tuple[int, int], str] = {}
    parts: dict[int, tuple[int, int]] = {}
    V, P = m.PartitionVersion, m.Partition
    for chunk in summary.chunks(pids):  # by partition (the key's prefix): a few versions each
        states.update(((p, v), state) for p, v, state in summary.fetch(s, select(V.partition_id, V.version, V.state)
                                                                         .where(V.partition_id.in_(chunk)))
                      if (p, v) in versions)
        parts.update((p, (t, vis)) for p, t, vis in summary.fetch(s, select(P.id, P.table_id, P.visible_version)
                                                               .where(P.id.in_(chunk))))
    return rows, states, parts


def contribution(rows: dict[Key, dict], parts: dict[int, tuple[int, int]]) -> tuple[dict, dict]:
    """What ``rows`` (every replica of some whole buckets) add to ``bucket_replicas`` and
    ``bucket_sizes``: :func:`summary.measure` computed in memory."""
    counts: dict = {}
    biggest: dict = {}
    for (pid, version, seq, be), r in rows.items():  # a repair's batch: thousands of rows, twice
        state = r["state"]
        if state != "verified" and state != "bad":
            continue
        part = parts.get(pid)
        if part is None or version != part[1]:
            continue
        t = r["table_id"]
        c = counts.get((t, seq, be))
        if c is None:
            c = counts[(t, seq, be)] = [0, 0, 0]
        if state == "verified":
            size = r["bytes"]
            c[0] += 1
            c[1] += size
            if biggest.get((t, pid, seq), -1) < size:
                biggest[(t, pid, seq)] = size
        else:
            c[2] += 1
    sizes: dict = defaultdict(int)
    for (t, _, seq), b in biggest.items():
        sizes[(t, seq)] += b
    return {k: tuple(v) for k, v in counts.items()}, dict(sizes)


def add_difference(s: Session, before: tuple[dict, dict], after: tuple[dict, dict]) -> None:
    """Add ``after - before`` to the summaries (what :func:`summary.tracking` does after its block)."""
    (c0, z0), (c1, z1) = before, after
    counts = {k: tuple(a - b for a, b in zip(c1.get(k, (0, 0, 0)), c0.get(k, (0, 0, 0)))) for k in c0.keys() | c1.keys()}
    sizes = {k: z1.get(k, 0) - z0.get(k, 0) for k in z0.keys() | z1.keys()}
    summary.add(s, {k: v for k, v in counts.items() if any(v)}, {k: v for k, v in sizes.items() if v})


_INSERTED = ("table_id", "partition_id", "version", "bucket_seq", "backend_id", "state", "path", "rows", "bytes",
             "checksum", "created_at", "verified_at", "drop_after", "files")
_inserted = itemgetter(*_INSERTED)


def write(s: Session, inserts: list[dict], updates: list[dict]) -> None:
    """One executemany ``INSERT`` of the new replica rows and one ``UPDATE`` by primary key of the
    changed ones (``updates``: dicts of one shape, with ``id``), as plain tuples
    (:func:`summary.run_many`): no ORM object and no SQLAlchemy parameter dict per row."""
    summary.run_many(s, "clones.insert", lambda: insert(R.__table__), _INSERTED, list(map(_inserted, inserts)))
    if updates:
        names = sorted(k for k in updates[0] if k != "id")
        c = R.__table__.c
        summary.run_many(s, "clones.update:" + ",".join(names),
                         lambda: update(R.__table__).where(c.id == bindparam("row_id")).values({n: bindparam(n) for n in names}),
                         ("row_id", *names), [(u["id"], *(u[n] for n in names)) for u in updates])
