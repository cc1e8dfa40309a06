"""Registering a clone job's results in bulk: the rows of a lost disk's repair (thousands of clones
per batch) written with a few statements instead of one ORM object each.

:meth:`BalanceJobs.register_clones <airflow_colocate.catalog.balance_jobs.BalanceJobs.register_clones>`
registers clones that are all new rows (every clone of a lost disk's repair) without loading their
buckets (:func:`register_new`). Otherwise (:func:`register_loaded`) it loads every replica of the buckets the results name as plain rows (:func:`load`), decides in memory
what each result changes, and writes the new rows with one multi-row ``INSERT``, the changed ones
with one ``UPDATE`` by primary key (:func:`write`). The per-bucket summaries
(:mod:`airflow_colocate.catalog.summary`) are kept exact without re-measuring the buckets in SQL
before and after: the loaded rows are every replica of those buckets, so what the changed rows and
buckets contribute before and after is computed from them (:func:`difference`, the same rule as
``summary.measure``: verified and bad replicas of the visible version count, and a bucket's size is
its largest verified replica) and added. ``summary.drift`` stays empty (tests).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

from sqlalchemy import Text, bindparam, insert, literal_column, null, select, update
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog import summary
from airflow_colocate.catalog.stability import mark_bad

R = m.Replica
Key = tuple[int, int, int, int]  # (partition, version, bucket seq, backend)
Bucket = tuple[int, int, int]  # (partition, version, bucket seq)
_COLUMNS = (R.id, R.table_id, R.partition_id, R.version, R.bucket_seq, R.backend_id, R.state, R.path, R.bytes)
_NAMES = tuple(c.key for c in _COLUMNS)
# a loaded row: a list [id, table, state, path, bytes], changed in place (id None: inserted by this call)
ID, TABLE, STATE, PATH, BYTES = range(5)


def load(s: Session, results: list) -> tuple[dict[Key, list], dict[Bucket, list[Key]], dict[tuple[int, int], str],
                                             dict[int, tuple[int, int]]]:
    """(every replica of the results' buckets as a row list by key, the keys of each bucket, each
    (partition, version)'s state, each partition's (table, visible version)): the few columns a
    registration reads, in chunked ``IN`` queries."""
    buckets = sorted({(r.partition_id, r.version, r.bucket_seq) for r in results})
    versions = {(r.partition_id, r.version) for r in results}
    pids = sorted({r.partition_id for r in results})
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
    rows: dict[Key, list] = {}
    by_bucket: dict[Bucket, list[Key]] = {}
    for rid, t, pid, version, seq, be, state, path, size in found:
        key = (pid, version, seq, be)
        rows[key] = [rid, t, state, path, size]
        keys = by_bucket.get(key[:3])
        if keys is None:
            by_bucket[key[:3]] = [key]
        else:
            keys.append(key)
    states: dict[tuple[int, int], str] = {}
    parts: dict[int, tuple[int, int]] = {}
    V, P = m.PartitionVersion, m.Partition
    for chunk in summary.chunks(pids):  # by partition (the key's prefix): a few versions each
        states.update(((p, v), state) for p, v, state in summary.fetch(s, select(V.partition_id, V.version, V.state)
                                                                         .where(V.partition_id.in_(chunk)))
                      if (p, v) in versions)
        parts.update((p, (t, vis)) for p, t, vis in summary.fetch(s, select(P.id, P.table_id, P.visible_version)
                                                               .where(P.id.in_(chunk))))
    return rows, by_bucket, states, parts


def difference(rows: dict[Key, list], by_bucket: dict[Bucket, list[Key]], parts: dict[int, tuple[int, int]],
               was: dict[Key, tuple[str, int] | None]) -> tuple[dict, dict]:
    """What the change of the rows ``was`` names ((state, bytes) before it, None for a row this call
    inserts) adds to ``bucket_replicas`` and ``bucket_sizes``, by :func:`summary.measure`'s rule:
    verified and bad replicas of the visible version count, a bucket's size is its largest verified
    replica. A row's count follows from the row alone; a bucket's size from every row of the bucket
    (``by_bucket``: all of them were loaded), before and after, for the changed buckets only."""
    counts: dict = {}
    touched: set[Bucket] = set()
    for key, old in was.items():
        part = parts.get(key[0])
        if part is None or key[1] != part[1]:
            continue
        row = rows[key]
        state = row[STATE]
        v, b, bad = (1, row[BYTES], 0) if state == "verified" else (0, 0, 1 if state == "bad" else 0)
        if old is not None:
            if old[0] == "verified":
                v, b = v - 1, b - old[1]
            elif old[0] == "bad":
                bad -= 1
        if v or b or bad:
            c = counts.get((part[0], key[2], key[3]))
            if c is None:
                c = counts[(part[0], key[2], key[3])] = [0, 0, 0]
            c[0], c[1], c[2] = c[0] + v, c[1] + b, c[2] + bad
        touched.add(key[:3])
    sizes: dict = defaultdict(int)
    for bucket in touched:
        before = after = 0
        for key in by_bucket[bucket]:
            row = rows[key]
            if row[STATE] == "verified" and row[BYTES] > after:
                after = row[BYTES]
            if key in was:
                old = was[key]
                if old is not None and old[0] == "verified" and old[1] > before:
                    before = old[1]
            elif row[STATE] == "verified" and row[BYTES] > before:
                before = row[BYTES]
        if after != before:
            sizes[(parts[bucket[0]][0], bucket[2])] += after - before
    return {k: tuple(v) for k, v in counts.items() if any(v)}, {k: v for k, v in sizes.items() if v}


_INSERTED = ("table_id", "partition_id", "version", "bucket_seq", "backend_id", "state", "path", "rows", "bytes",
             "checksum", "created_at", "verified_at", "drop_after", "files", "etags")


def write(s: Session, inserts: list[tuple], updates: list[dict]) -> None:
    """One executemany ``INSERT`` of the new replica rows (tuples in :data:`_INSERTED` order) and one
    ``UPDATE`` by primary key of the changed ones (``updates``: dicts of one shape, with ``id``), as
    plain tuples (:func:`summary.run_many`): no ORM object and no SQLAlchemy parameter dict per row."""
    summary.run_many(s, "clones.insert", lambda: insert(R.__table__), _INSERTED, inserts)
    if updates:
        names = sorted(k for k in updates[0] if k != "id")
        c = R.__table__.c
        summary.run_many(s, "clones.update:" + ",".join(names),
                         lambda: update(R.__table__).where(c.id == bindparam("row_id")).values({n: bindparam(n) for n in names}),
                         ("row_id", *names), [(u["id"], *(u[n] for n in names)) for u in updates])


def register_loaded(db, s: Session, results: list, now) -> tuple[int, list[str], list[str], list[str]]:
    """The general registration of a clone batch (``BalanceJobs.register_clones``): every replica
    of the results' buckets loaded as plain rows (:func:`load`), the changes decided in memory and
    written in bulk, the summaries updated from the difference. A clone that found its source's
    bytes differ from the catalog, or its directory holding files the catalog does not list, marks
    that source ``bad``. Returns (replicas registered, directories of versions no longer there,
    the failures' lines, the paths marked bad)."""
    added, stale, failed, bad = 0, [], [], []
    unclean: list[tuple[int, str, str]] = []
    rows, by_bucket, versions, parts = load(s, results)
    was: dict[tuple, tuple | None] = {}  # (state, bytes) of each changed row before; None: inserted
    inserts: dict[tuple, tuple] = {}
    updates: dict[int, dict] = {}
    for res in results:
        if not res.ok:
            failed.append(f"{res.path}: {res.error}")
            if res.source_bad:
                key = (res.partition_id, res.version, res.bucket_seq, res.src_backend_id)
                src = rows.get(key)
                if src is not None and src[STATE] == "verified" and src[ID] is not None:
                    was.setdefault(key, (src[STATE], src[BYTES]))
                    src[STATE] = "bad"
                    updates.setdefault(src[ID], {"id": src[ID]})["state"] = "bad"
                    bad.append(src[PATH])
                    db.event(s, "replica.bad", src[PATH], replica_id=src[ID], backend_id=res.src_backend_id,
                             reason=(res.error or "checksum mismatch while cloning")[:2000])
            continue
        if versions.get((res.partition_id, res.version)) not in ("committed", "superseded"):
            stale.append(res.path)
            continue
        key = (res.partition_id, res.version, res.bucket_seq, res.backend_id)
        row = rows.get(key)
        if row is not None and row[STATE] == "deleting":
            continue  # its files are being removed; the next round clones again
        files = _files_of(res)
        if row is None or row[ID] is None:  # a new row (registered twice in one call: the last wins)
            table = parts[res.partition_id][0]
            if row is None:
                rows[key] = row = [None, table, None, None, 0]
                by_bucket.setdefault(key[:3], []).append(key)
                was[key] = None
            inserts[key] = (table, res.partition_id, res.version, res.bucket_seq, res.backend_id, "verified",
                            res.path, res.rows, res.bytes, res.checksum, now, now, None, files, etags_of(res))
        else:
            was.setdefault(key, (row[STATE], row[BYTES]))
            updates.setdefault(row[ID], {"id": row[ID]}).update(
                state="verified", path=res.path, rows=res.rows, bytes=res.bytes, checksum=res.checksum,
                verified_at=now, drop_after=None, files=files, etags=etags_of(res))
        row[STATE], row[PATH], row[BYTES] = "verified", res.path, res.bytes
        added += 1
        if getattr(res, "source_problem", None):
            src = rows.get((res.partition_id, res.version, res.bucket_seq, res.src_backend_id))
            if src is not None and src[ID] is not None:
                unclean.append((src[ID], res.source_problem,
                                f"replica {src[PATH]} holds files the catalog does not list: {res.source_problem}"))
    # one shape per UPDATE statement: rows that only turn bad apart from re-registered ones
    by_shape: dict[tuple, list[dict]] = {}
    for u in updates.values():
        by_shape.setdefault(tuple(sorted(u)), []).append(u)
    write(s, list(inserts.values()), [])
    for same in by_shape.values():
        write(s, [], same)
    summary.add(s, *difference(rows, by_bucket, parts, was))
    if inserts or updates:
        summary.touch_tables(s, {parts[pid][0] for pid, _, _ in by_bucket if pid in parts})
    if unclean:
        bad += mark_bad(db, s, [(r, why, gwhy) for i, why, gwhy in unclean if (r := s.get(m.Replica, i)) is not None])
    return added, stale, failed, bad


def etags_of(res) -> dict[str, str] | None:
    """{name: ETag} of a clone's or a write's files when it reported one for each (an S3 API's
    copies: each tied to the file's SHA-256 by the answer that proved it, storage/s3.py), else None:
    a copy from this replica is then proven by its SHA-256."""
    etags = getattr(res, "etags", None) or {}
    names = res.files if isinstance(res.files, list) else list(res.files)
    if not names or any(not etags.get(n) for n in names) or len(etags) != len(names):
        return None
    return {n: str(etags[n]) for n in sorted(names)}


def _files_of(res) -> list[list] | None:
    """[[name, size], ...] of a clone result, or None when it did not report every size (a clone
    job from before 0.2): the replica is then checked by its total size."""
    sizes = getattr(res, "sizes", None) or {}
    if any(n not in sizes for n in res.files):
        return None
    return [[n, int(sizes[n])] for n in sorted(res.files)]


def register_new(s: Session, results: list, now) -> tuple[int, list[str], set[int]] | None:
    """The clones of a repair or a move, registered without loading their buckets' rows: when no
    result's replica has a row yet (a new copy on a backend that held none: every clone of a lost
    disk's repair), each one is a new ``verified`` row, and what it adds to the summaries follows
    from one query (:func:`_probe`): its version's state, whether that version is visible, and
    the largest verified replica its bucket already has. Returns (replicas registered, directories
    of versions no longer there, tables touched), or None when any result needs the general path
    (a row at its key, a key twice, a source to mark): the caller then runs it.

    Exactly :func:`difference`'s rule: a new verified replica of the visible version counts one
    replica and its bytes on its backend, and grows its bucket's size only past the largest
    verified replica the bucket had (none of a bucket's new rows replaces one)."""
    keys = [(r.partition_id, r.version, r.bucket_seq, r.backend_id) for r in results]
    if not keys:
        return 0, [], set()
    if len(set(keys)) != len(keys) or any(not r.ok or getattr(r, "source_problem", None) for r in results):
        return None
    found = _probe(s, keys)
    if any(row[4] is not None for row in found):  # a row at a clone's key: the general path replaces it
        return None
    inserts, stale, tables = [], [], set()
    counts: dict = {}
    grown: dict[Bucket, list] = {}  # bucket -> [table, largest verified before, largest after]
    for res, (state, table, visible, before) in zip(results, (row[:4] for row in found)):
        if state not in ("committed", "superseded"):
            stale.append(res.path)
            continue
        inserts.append((table, res.partition_id, res.version, res.bucket_seq, res.backend_id,
                        res.path, res.rows, res.bytes, res.checksum, now, now, files_json(res),
                        None if (e := etags_of(res)) is None else json.dumps(e, separators=(",", ":"))))
        tables.add(table)
        if res.version != visible:
            continue
        c = counts.get((table, res.bucket_seq, res.backend_id))
        counts[(table, res.bucket_seq, res.backend_id)] = (1, res.bytes, 0) if c is None else (c[0] + 1, c[1] + res.bytes, 0)
        g = grown.get(bucket := (res.partition_id, res.version, res.bucket_seq))
        if g is None:
            grown[bucket] = [table, before or 0, max(before or 0, res.bytes)]
        elif res.bytes > g[2]:
            g[2] = res.bytes
    sizes: dict = defaultdict(int)
    for (_, _, seq), (table, before, after) in grown.items():
        if after != before:
            sizes[(table, seq)] += after - before
    summary.run_many(s, "clones.insert_new", lambda: insert(R.__table__).values(
        state=literal_column("'verified'"), drop_after=null(), files=bindparam("files", type_=Text()),
        etags=bindparam("etags", type_=Text())), _NEW, inserts)
    summary.add(s, counts, {k: v for k, v in sizes.items() if v})
    return len(inserts), stale, tables


_NEW = ("table_id", "partition_id", "version", "bucket_seq", "backend_id", "path", "rows", "bytes", "checksum",
        "created_at", "verified_at", "files", "etags")
_PLAIN = re.compile(r"[A-Za-z0-9._=+-]+\Z")  # a name JSON writes as it is, between quotes


def files_json(res) -> str | None:
    """A clone result's ``[[name, size], ...]`` as the JSON text ``replicas.files`` holds (what
    ``json.dumps`` writes), or None when it did not report every size (a clone job from before
    0.2: the replica is then checked by its total size). Written here, not by the column's JSON
    encoder: a repair registers thousands, and data files' names need no escaping."""
    sizes = getattr(res, "sizes", None) or {}
    if any(n not in sizes for n in res.files):
        return None
    return "[" + ", ".join(f'["{n}", {int(sizes[n])}]' if _PLAIN.match(n) else json.dumps([n, int(sizes[n])])
                           for n in sorted(res.files)) + "]"


def _probe(s: Session, keys: list[Key]) -> list[tuple]:
    """Per key (partition, version, bucket seq, backend), in order: (its version's state, the
    partition's table and visible version, the largest verified replica of its bucket, the id of
    a row at the key): one statement, the keys as an inline ``VALUES`` table (both dialects name
    its columns ``column1``...), each looked up through its primary key or ``uq_replica``."""
    listed = ", ".join(f"({i}, {int(p)}, {int(v)}, {int(seq)}, {int(be)})" for i, (p, v, seq, be) in enumerate(keys))
    rows = summary.fetch_sql(s, (
        "SELECT k.column1, pv.state, pt.table_id, pt.visible_version, "
        "(SELECT max(o.bytes) FROM replicas AS o WHERE o.partition_id = k.column2 AND o.version = k.column3 "
        "AND o.bucket_seq = k.column4 AND o.state = 'verified'), t.id "
        f"FROM (VALUES {listed}) AS k "
        "LEFT JOIN partitions AS pt ON pt.id = k.column2 "
        "LEFT JOIN partition_versions AS pv ON pv.partition_id = k.column2 AND pv.version = k.column3 "
        "LEFT JOIN replicas AS t ON t.partition_id = k.column2 AND t.version = k.column3 "
        "AND t.bucket_seq = k.column4 AND t.backend_id = k.column5"))
    out: list = [None] * len(keys)
    for i, state, table, visible, before, row_id in rows:
        out[i] = (state, table, visible, before, row_id)
    return out
