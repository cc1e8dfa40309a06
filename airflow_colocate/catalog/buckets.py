"""One group's replicas counted per (table, bucket seq, backend) from the bucket summaries, and
the committed partitions behind a non-zero count: what stability, repair and balance read without
loading a replica row per partition."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import and_, exists, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.summary import (add, fetch, fetch_sql, int_values, remeasure, replica_keys, touch_tables,
                                              tracking)


@dataclass
class Buckets:
    """One group's replicas as counts per (table, bucket seq, backend), read from the summaries:
    what stability, repairs and loads need, without a replica row. ``deficit`` says how many
    committed partitions lack a verified replica in a cell; :func:`lacking_rows`
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


class Lacking(NamedTuple):
    """A committed partition's bucket without a verified replica on a backend (``state`` and
    ``path`` of the replica row there, if any). A named tuple: a repair makes thousands."""

    table_id: int
    partition_id: int
    partition: str
    version: int
    bucket_seq: int
    backend_id: int
    state: str | None
    path: str | None


class Source(NamedTuple):
    """A verified or bad replica of a lacking bucket: what a clone may copy from."""

    id: int
    backend_id: int
    state: str
    path: str
    checksum: str
    rows: int
    bytes: int
    files: list | str | None  # as stored: JSON text on SQLite (clone_needs decodes the copied sources' at once)
    etags: dict | str | None = None  # as stored, likewise: {name: ETag} on an S3 API


def load_buckets(s: Session, g: m.ColocateGroup) -> Buckets:
    """The group's live tables and their summaries: a handful of small queries."""
    tables = {t.id: t for t in s.scalars(select(m.Table).where(m.Table.group_id == g.id, m.Table.state == "normal")
                                         .order_by(m.Table.id))}
    db_names = {d.id: d.name for d in s.scalars(select(m.Database))}
    labels = {t.id: f"{db_names.get(t.db_id, '?')}.{t.name}" for t in tables.values()}
    bk = Buckets(group=g, tables=tables, labels=labels, committed={}, counts={})
    if not tables:
        return bk
    ids = list(tables)
    q = (select(m.Partition.table_id, m.Partition.bucket_num, func.count())
         .where(m.Partition.table_id.in_(ids), m.Partition.visible_version > 0)
         .group_by(m.Partition.table_id, m.Partition.bucket_num))
    for t, buckets, n in fetch(s, q):
        bk.committed.setdefault(t, {})[buckets] = int(n)
    BR, BS = m.BucketReplicas, m.BucketSize  # columns, not ORM rows: tables x buckets x backends of them
    for t, seq, be, v, b, bad in fetch(s, select(BR.table_id, BR.bucket_seq, BR.backend_id, BR.verified, BR.bytes,
                                                  BR.bad).where(BR.table_id.in_(ids))):
        bk.counts[(t, seq, be)] = (v, b, bad)
    bk.sizes.update(((t, seq), b) for t, seq, b in fetch(s, select(BS.table_id, BS.bucket_seq, BS.bytes)
                                                               .where(BS.table_id.in_(ids))))
    return bk


def _lacking(cells: Sequence[tuple[int, int, int, int]], *extra):
    """Committed partitions x ``cells`` with no verified replica in the cell, in check order
    (table, partition as the database orders values, seq, position in the map row): each cell's
    partitions by ``uq_partition_value``, each replica looked up by ``uq_replica``."""
    c = int_values(("t", "seq", "k", "be"), cells).subquery("cells")
    P, R = m.Partition, m.Replica
    q = (select(P.table_id, P.id, P.value, P.visible_version, c.c.seq, c.c.be, R.state, R.path, *extra)
         .select_from(c)
         .join(P, and_(P.table_id == c.c.t, P.bucket_num > c.c.seq))
         .outerjoin(R, and_(R.partition_id == P.id, R.version == P.visible_version, R.bucket_seq == c.c.seq,
                            R.backend_id == c.c.be))
         .where(P.visible_version > 0, or_(R.id.is_(None), R.state != "verified")))
    return q, c, [P.table_id, P.value, c.c.seq, c.c.k]


def lacking_rows(s: Session, cells: Sequence[tuple[int, int, int, int]],
                  limit: int | None = None) -> list[Lacking]:
    """The detail of ``cells`` ((table, seq, position, backend), see :meth:`Buckets.cells`) in
    check order: table, partition (as the database orders values), seq, position in the map row.
    One statement for every cell; with a ``limit`` (a check's first reasons), one per table until
    it is reached, so a check stops early instead of listing a repair's thousands of rows."""
    cells = list(cells)
    if not cells:
        return []
    if limit is None:
        groups = [cells]
    else:
        by_table: dict[int, list[tuple[int, int, int, int]]] = {}
        for cell in cells:
            by_table.setdefault(cell[0], []).append(cell)
        groups = list(by_table.values())
    out: list[Lacking] = []
    for mine in groups:
        left = None if limit is None else limit - len(out)
        if left is not None and left <= 0:
            break
        q, _, order = _lacking(mine)
        q = q.order_by(*order)
        if left is not None:
            q = q.limit(left)
        out += [Lacking(t, pid, value, version, seq, be, state, path)
                for t, pid, value, version, seq, be, state, path in fetch(s, q)]
    return out


def lacking_with_sources(s: Session, cells: Sequence[tuple[int, int, int, int]],
                         alive: set[int]) -> list[tuple[Lacking, list[Source]]]:
    """:func:`lacking_rows` with, for each, the verified and bad replicas of its bucket on the
    ``alive`` backends (the only possible clone sources; by id: the columns a source needs, never
    ORM objects), in one statement: a lost disk's repair lists thousands of them. Plain SQL run by
    the driver (the cells and backends inline integers, as :func:`lacking_rows`'s ``VALUES``
    table): nothing compiled per call, rows as the driver gives them."""
    cells = list(cells)
    if not cells:
        return []
    listed = ", ".join(f"({int(t)}, {int(seq)}, {int(k)}, {int(be)})" for t, seq, k, be in cells)
    sources = ", ".join(str(int(be)) for be in sorted(alive)) or "NULL"
    rows = fetch_sql(s, (
        "SELECT p.table_id, p.id, p.value, p.visible_version, c.column2, c.column4, r.state, r.path, "
        "s.id, s.backend_id, s.state, s.path, s.checksum, s.rows, s.bytes, s.files, s.etags "
        f"FROM (VALUES {listed}) AS c "
        "JOIN partitions AS p ON p.table_id = c.column1 AND p.bucket_num > c.column2 "
        "LEFT OUTER JOIN replicas AS r ON r.partition_id = p.id AND r.version = p.visible_version "
        "AND r.bucket_seq = c.column2 AND r.backend_id = c.column4 "
        "LEFT OUTER JOIN replicas AS s ON s.partition_id = p.id AND s.version = p.visible_version "
        f"AND s.bucket_seq = c.column2 AND s.state IN ('verified', 'bad') AND s.backend_id IN ({sources}) "
        "WHERE p.visible_version > 0 AND (r.id IS NULL OR r.state <> 'verified') "
        "ORDER BY p.table_id, p.value, c.column2, c.column3, s.id"))
    out: list[tuple[Lacking, list[Source]]] = []
    last = None
    make, source = Lacking._make, Source._make
    for row in rows:
        key = row[1], row[4], row[5]
        if key != last:
            last = key
            known: list[Source] = []
            out.append((make(row[:8]), known))
        if row[8] is not None:
            known.append(source(row[8:]))
    return out


def whole(seq: int, row: Sequence[int]):
    """A replica's bucket has a verified replica of its version on every backend of ``row``."""
    others = aliased(m.Replica)
    return and_(*[exists().where(others.partition_id == m.Replica.partition_id, others.version == m.Replica.version,
                                 others.bucket_seq == seq, others.backend_id == be, others.state == "verified")
                  for be in row])


def mark_redundant(s: Session, bk: Buckets, bucket_map: list[list[int]], drop_after: datetime) -> int:
    """Mark ``dropping`` the replicas (verified or bad) of visible versions on backends the map
    no longer names; a bucket keeps every old copy until it is whole on its map.

    A redundant cell (table, seq, backend) of a column whole on its map (no deficit on any mapped
    backend: every committed partition has a verified replica on each) is marked entirely, so all
    of them go in one ``UPDATE`` and the summaries follow from ``bk`` without reading a replica:
    each marked cell leaves ``bucket_replicas`` whole, and a column's ``bucket_sizes`` (the sum of
    each partition's largest verified copy) stays when a mapped backend's copies add up to it (then
    each of them is its partition's largest, and it stays); a column where none does (copies of
    unequal sizes) is recounted. A column with a deficit keeps its per-bucket test
    (:func:`whole`), one statement per column (rare: a mapped backend is down)."""
    R, P = m.Replica, m.Partition
    cells = sorted((t, seq, be) for (t, seq, be), (v, _, bad) in bk.counts.items()
                   if t in bk.tables and seq < len(bucket_map) and be not in bucket_map[seq] and v + bad)
    guarded = sorted({(t, seq) for t, seq, _ in cells if any(bk.deficit(t, seq, be) for be in bucket_map[seq])})
    clean = [c for c in cells if (c[0], c[1]) not in set(guarded)]
    visible = select(P.visible_version).where(P.id == R.partition_id).scalar_subquery()
    leaving = R.state.in_(("verified", "bad"))
    n = 0
    if guarded:
        with tracking(s, columns=guarded):
            for t, seq in guarded:
                row = bucket_map[seq]
                n += s.execute(update(R).where(R.table_id == t, R.bucket_seq == seq, R.backend_id.not_in(row), leaving,
                                               R.version == visible, whole(seq, row))
                               .values(state="dropping", drop_after=drop_after)
                               .execution_options(synchronize_session=False)).rowcount
    if not clean:
        return n
    s.flush()
    marked = s.execute(update(R).where(replica_keys(s, ("table_id", "bucket_seq", "backend_id"), clean), leaving,
                                       R.version == visible)
                       .values(state="dropping", drop_after=drop_after)
                       .execution_options(synchronize_session=False)).rowcount
    # every visible verified or bad replica of a marked cell left it: its summary row is now zero
    add(s, {c: tuple(-x for x in bk.counts[c]) for c in clean}, {})
    columns = sorted({(t, seq) for t, seq, _ in clean})
    remeasure(s, [(t, seq) for t, seq in columns if not any(
        bk.counts.get((t, seq, be), (0, 0, 0))[1] == bk.sizes.get((t, seq), 0) for be in bucket_map[seq])])
    touch_tables(s, {t for t, _ in columns})
    return n + marked
