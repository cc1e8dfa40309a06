"""Partitions no read can serve now: a committed partition is *unavailable* when one of its buckets
has verified replicas of the visible version only on backends that are not alive (down,
decommissioning, decommissioned), e.g. a replication-1 table outside any group whose only copy is
on a disk that was pulled. A read of it fails until the backend is back (or balance has rebuilt the
bucket elsewhere, which needs a readable copy: with none left, only the backend's return helps).

Computed from the bucket summaries first (``bucket_replicas``: per table, bucket seq and backend,
how many committed partitions have a verified replica there), so a healthy catalog, or a group
whose other replicas are all on alive backends, costs buckets x backends rows however long its
history: a (table, bucket seq) is safe when no backend that is not alive holds one of its
replicas, or when one alive backend holds as many as the table has committed partitions (one
replica per partition and backend, so every partition has one there); it is lost for every
partition when no alive backend holds any of it and a dark one holds all (counted from the
partition rows: a lost disk that held a third of a 3-year table costs no replica read). Only the cells left
(typically a replication-1 table with a bucket on a down backend) are asked in SQL, one indexed
query per table over the replicas of those buckets on the down backends, each with a NOT EXISTS on
the alive ones (``ix_replica_table``, ``uq_replica``); only the lost ones come back (one row per lost
partition and down backend), never the replica rows of a healthy history.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import and_, exists, func, select
from sqlalchemy.orm import Session, aliased

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.summary import chunks

MAX_LISTED = 100  # partition values listed per table; the count is always exact


@dataclass(frozen=True)
class TableAvailability:
    table_id: int
    table: str  # db.table
    count: int  # unavailable partitions
    partitions: tuple[str, ...]  # the first MAX_LISTED (or the caller's limit) by value
    backends: tuple[str, ...]  # the not-alive backends holding their only verified copies


@dataclass(frozen=True)
class Availability:
    tables: dict[int, TableAvailability]  # only tables with an unavailable partition
    by_backend: dict[int, int] = field(default_factory=dict)  # backend id -> partitions unavailable with it

    @property
    def total(self) -> int:
        return sum(t.count for t in self.tables.values())


def unavailable(s: Session, table_ids: list[int] | None = None, *, limit: int = MAX_LISTED) -> Availability:
    """The unavailable partitions of live tables (of ``table_ids`` only, if given)."""
    state = {be: st for be, st in s.execute(select(m.Backend.id, m.Backend.state))}
    alive = {be for be, st in state.items() if st == "alive"}
    dark = sorted(set(state) - alive)
    if not dark:
        return Availability({})
    BR = m.BucketReplicas
    q = (select(BR.table_id, BR.bucket_seq, BR.backend_id).join(m.Table, m.Table.id == BR.table_id)
         .where(BR.backend_id.in_(dark), BR.verified > 0, m.Table.state == "normal"))
    if table_ids is not None:
        q = q.where(BR.table_id.in_(table_ids))
    held: dict[tuple[int, int], list[int]] = defaultdict(list)  # (table, seq) -> dark backends holding replicas
    for t, seq, be in s.execute(q):
        held[(t, seq)].append(be)
    if not held:
        return Availability({})
    tables = sorted({t for t, _ in held})
    committed: dict[int, list[tuple[int, int]]] = defaultdict(list)  # table -> [(bucket_num, partitions)]
    for t, buckets, n in s.execute(select(m.Partition.table_id, m.Partition.bucket_num, func.count())
                                   .where(m.Partition.table_id.in_(tables), m.Partition.visible_version > 0)
                                   .group_by(m.Partition.table_id, m.Partition.bucket_num)):
        committed[t].append((buckets, int(n)))
    best: dict[tuple[int, int], int] = defaultdict(int)  # (table, seq) -> most verified on one alive backend
    on_dark: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)  # (table, seq) -> {dark backend: verified}
    for t, seq, be, n in s.execute(select(BR.table_id, BR.bucket_seq, BR.backend_id, BR.verified)
                                   .where(BR.table_id.in_(tables))):
        if (t, seq) not in held:
            continue
        if be in alive:
            best[(t, seq)] = max(best[(t, seq)], n)
        else:
            on_dark[(t, seq)][be] = n
    open_cells: dict[int, list[tuple[int, int]]] = defaultdict(list)  # table -> [(seq, dark backend)]
    whole: dict[int, list[int]] = defaultdict(list)  # table -> seqs no partition can read (every one lost)
    for (t, seq), holders in sorted(held.items()):
        expected = sum(n for buckets, n in committed[t] if buckets > seq)
        if best.get((t, seq), -1) >= expected:
            continue
        if expected and (t, seq) not in best and max(on_dark[(t, seq)].values(), default=0) == expected:
            whole[t].append(seq)  # no alive backend holds any of it, a dark one holds all of it
        open_cells[t] += [(seq, be) for be in holders]
    out: dict[int, TableAvailability] = {}
    by_backend: dict[int, int] = defaultdict(int)
    names = {be: name for be, name in s.execute(select(m.Backend.id, m.Backend.name))}
    for t, cells in open_cells.items():
        count, values, holders = 0, (), {}
        s0 = min(whole[t]) if whole[t] else None
        if s0 is not None:
            # Bucket s0 is lost for every committed partition that has it: count them from the
            # partition rows, and the holders from the summaries (at least this many each).
            count = sum(n for buckets, n in committed[t] if buckets > s0)
            values = tuple(s.scalars(select(m.Partition.value).where(
                m.Partition.table_id == t, m.Partition.visible_version > 0, m.Partition.bucket_num > s0)
                .order_by(m.Partition.value).limit(limit))) if limit > 0 else ()
            for seq in whole[t]:
                for be, n in on_dark[(t, seq)].items():
                    holders[be] = max(holders.get(be, 0), n)
        if s0 is None or any(buckets <= s0 for buckets, _ in committed[t]):
            found = _table(s, t, cells, dark, limit, below=s0)
            if found is not None:  # partitions without bucket s0: disjoint from the ones above
                count += found[0]
                values = tuple(sorted(values + found[1])[:limit])
                for be, n in found[2].items():
                    holders[be] = holders.get(be, 0) + n
        if not count:
            continue
        for be, n in holders.items():
            by_backend[be] += n
        out[t] = TableAvailability(table_id=t, table=_label(s, t), count=count, partitions=values,
                                   backends=tuple(names[be] for be in sorted(holders)))
    return Availability(out, dict(by_backend))


def _table(s: Session, t: int, cells: list[tuple[int, int]], dark: list[int], limit: int,
           below: int | None = None) -> tuple[int, tuple[str, ...], dict[int, int]] | None:
    """(count, the first ``limit`` values, dark backend -> partitions) of table ``t``'s partitions
    (with at most ``below`` buckets, if given) with a bucket of ``cells`` ((seq, dark backend))
    whose verified replicas are all on dark backends."""
    R, other = m.Replica, aliased(m.Replica)
    # "on an alive backend" as "not on a dark one": one range of uq_replica per row, not a probe per alive backend
    readable = exists().where(other.partition_id == R.partition_id, other.version == R.version,
                              other.bucket_seq == R.bucket_seq, other.state == "verified",
                              other.backend_id.not_in(dark))
    # seqs x backends covers the cells (and maybe a few more, each an exact check too): two IN lists
    # keep the whole ix_replica_table prefix, where an OR of the cells made SQLite walk the table.
    lost = and_(R.table_id == t, R.bucket_seq.in_(sorted({seq for seq, _ in cells})),
                R.backend_id.in_(sorted({be for _, be in cells})), R.state == "verified", ~readable)
    if below is not None:
        lost = and_(lost, m.Partition.bucket_num <= below)
    sub = select(R.partition_id, R.backend_id).join(
        m.Partition, and_(m.Partition.id == R.partition_id, m.Partition.visible_version == R.version)
    ).where(lost).distinct().subquery()
    # One row per (lost partition, dark backend holding it): bounded by the lost buckets, not the history.
    rows = s.execute(select(sub.c.partition_id, sub.c.backend_id)).all()
    if not rows:
        return None
    holders: dict[int, int] = defaultdict(int)
    for _, be in rows:
        holders[be] += 1
    pids = sorted({pid for pid, _ in rows})
    values: list[str] = []
    for chunk in chunks(pids) if limit > 0 else ():  # ids, not a subquery: SQLite would scan partitions
        values += s.scalars(select(m.Partition.value).where(m.Partition.id.in_(chunk)))
    return len(pids), tuple(sorted(values)[:limit]), holders


def _label(s: Session, t: int) -> str:
    db, name = s.execute(select(m.Database.name, m.Table.name).join(m.Table, m.Table.db_id == m.Database.id)
                         .where(m.Table.id == t)).one()
    return f"{db}.{name}"


def lost_buckets(s: Session, table_id: int, value: str) -> list[int]:
    """The buckets of one committed partition that no verified replica on an alive backend holds
    (what a message names after :func:`unavailable` found the partition): one partition's rows."""
    part = s.execute(select(m.Partition.id, m.Partition.visible_version, m.Partition.bucket_num).where(
        m.Partition.table_id == table_id, m.Partition.value == value, m.Partition.visible_version > 0)).first()
    if part is None:
        return []
    alive = select(m.Backend.id).where(m.Backend.state == "alive")
    readable = set(s.scalars(select(m.Replica.bucket_seq).where(
        m.Replica.partition_id == part.id, m.Replica.version == part.visible_version, m.Replica.state == "verified",
        m.Replica.backend_id.in_(alive))))
    return [b for b in range(part.bucket_num) if b not in readable]


__all__ = ["MAX_LISTED", "Availability", "TableAvailability", "lost_buckets", "unavailable"]
