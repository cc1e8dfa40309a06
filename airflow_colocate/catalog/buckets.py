"""One group's replicas counted per (table, bucket seq, backend) from the bucket summaries, and
the committed partitions behind a non-zero count: what stability, repair and balance read without
loading a replica row per partition."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session, aliased

from airflow_colocate.catalog import models as m


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


@dataclass(frozen=True)
class Lacking:
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
    for t, buckets, n in s.execute(q):
        bk.committed.setdefault(t, {})[buckets] = int(n)
    for r in s.scalars(select(m.BucketReplicas).where(m.BucketReplicas.table_id.in_(ids))):
        bk.counts[(r.table_id, r.bucket_seq, r.backend_id)] = (r.verified, r.bytes, r.bad)
    for r in s.scalars(select(m.BucketSize).where(m.BucketSize.table_id.in_(ids))):
        bk.sizes[(r.table_id, r.bucket_seq)] = r.bytes
    return bk


def lacking(s: Session, t: int, seq: int, be: int, limit: int | None = None) -> list[Lacking]:
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
    return [Lacking(t, pid, value, version, seq, be, state, path) for pid, value, version, state, path in s.execute(q)]


def lacking_rows(s: Session, cells: Sequence[tuple[int, int, int, int]],
                  limit: int | None = None) -> list[Lacking]:
    """The detail of ``cells`` ((table, seq, position, backend), see :meth:`Buckets.cells`) in
    check order: table, partition (as the database orders values), seq, position in the map row."""
    out: list[Lacking] = []
    by_table: dict[int, list[tuple[int, int, int, int]]] = {}
    for cell in cells:
        by_table.setdefault(cell[0], []).append(cell)
    for t, mine in by_table.items():
        left = None if limit is None else limit - len(out)
        if left is not None and left <= 0:
            break
        rows = [(seq, k, row) for _, seq, k, be in mine for row in lacking(s, t, seq, be, left)]
        if len(mine) > 1:
            rank = {pid: i for i, pid in enumerate(s.scalars(
                select(m.Partition.id).where(m.Partition.table_id == t, m.Partition.visible_version > 0)
                .order_by(m.Partition.value)))}
            rows.sort(key=lambda x: (rank[x[2].partition_id], x[0], x[1]))
        out += [row for _, _, row in rows[:left]]
    return out


def whole(seq: int, row: Sequence[int]):
    """A replica's bucket has a verified replica of its version on every backend of ``row``."""
    others = aliased(m.Replica)
    return and_(*[exists().where(others.partition_id == m.Replica.partition_id, others.version == m.Replica.version,
                                 others.bucket_seq == seq, others.backend_id == be, others.state == "verified")
                  for be in row])
