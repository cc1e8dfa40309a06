"""What a query's read planning needs from the catalog, read in one transaction with a fixed
handful of set statements, one per kind of row and not one per table or partition: the tables,
their partitions, the partitions' replicas, the groups with their maps, the backends, the flags. Per table and per group statements made the
"catalog" phase of a query's fixed cost (six transactions, about 24 statements for 3 tables).
Plain columns throughout: no ORM rows, so no identity map or attribute loading for hundreds of
replicas. Nothing is kept between calls: a commit or a backend marked down shows in the next one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.rows import DEFAULT_DB, backend_view, table_row
from airflow_colocate.catalog.session import FLAGS
from airflow_colocate.catalog.summary import VISIBLE
from airflow_colocate.model.views import BackendView, GroupView, PartitionReplicas, ReplicaView, TableView, group_full_name
from airflow_colocate.core import naming
from airflow_colocate.core.errors import NotFound
from airflow_colocate.core.times import utc

_PARAMS = 500  # bound values a statement takes at most (SQLite's old limit is 999)


class QueryReads(NamedTuple):
    """What :meth:`Reads.query` read in its one transaction (detached views)."""
    reads: dict[str, tuple[TableView, list[PartitionReplicas]]]  # by the name the caller gave
    groups: dict[str, GroupView]  # by group id ("dbId.grpId"), with bucket maps
    backends: list[BackendView]
    flags: dict[str, bool]


def query_reads(s: Session, tables: Mapping[str, Sequence[str] | None]) -> QueryReads:
    views = _tables(s, tables)
    parts = _partitions(s, {name: (views[name].id, tables[name]) for name in tables})
    for name, wanted in tables.items():
        _check_committed(s, views[name], parts[views[name].id], wanted)
    pids = [p[0] for by_value in parts.values() for p in by_value.values() if p[3]]
    buckets = _replicas(s, {p[0]: p[2] for by_value in parts.values() for p in by_value.values() if p[3]}, pids)
    reads = {}
    for name, wanted in tables.items():
        by_value = parts[views[name].id]
        values = list(wanted) if wanted is not None else [v for v, p in by_value.items() if p[3]]  # in value order
        reads[name] = (views[name], [PartitionReplicas(value=v, version=by_value[v][3], buckets=buckets[by_value[v][0]],
                                                        layout_buckets=by_value[v][4]) for v in values])
    groups = _groups(s, {v.group_id for v in views.values() if v.group_id})
    backends = [backend_view(b) for b in s.execute(select(m.Backend.__table__).order_by(m.Backend.id))]
    flags = {f: False for f in FLAGS}
    flags.update((name, value) for name, value in s.execute(select(m.Flag.name, m.Flag.value)))
    return QueryReads(reads, groups, backends, flags)


def _tables(s: Session, tables: Mapping[str, Sequence[str] | None]) -> dict[str, TableView]:
    """Every named table in one statement (with its database and group names); a name it does not
    find goes through ``rows.table_row``, which refuses it with its usual message."""
    T, D, G = m.Table, m.Database, m.ColocateGroup
    keys = {name: naming.split_qualified(name, DEFAULT_DB) for name in tables}
    q = (select(T.id, D.name, T.name, T.columns, T.dist_cols, T.partition_cols, T.bucket_num, T.replication_num,
                T.group_id, T.state, T.dropped_at, T.schema_version, T.retention_days, G.db_id, G.name)
         .join(D, D.id == T.db_id).outerjoin(G, G.id == T.group_id)
         .where(T.state == "normal", T.name.in_(sorted({t for _, t in keys.values()})))
         .order_by(T.dropped_at.desc()))
    found: dict[tuple[str, str], TableView] = {}
    for (tid, db, name, cols, dist, pcols, bnum, rnum, gid, state, dropped, schema_v, keep, g_db, g_name) in s.execute(q):
        found.setdefault((db, name), TableView(
            id=tid, db=db, name=name, columns=tuple(tuple(c) for c in cols), dist_cols=tuple(dist),
            partition_cols=tuple(pcols), bucket_num=bnum, replication_num=rnum,
            group_id=f"{g_db or 0}.{gid}" if gid else None, group_name=group_full_name(g_db, g_name) if gid else None, state=state,
            dropped_at=utc(dropped), schema_version=schema_v or 1, retention_days=keep))
    out = {}
    for name, key in keys.items():
        if key not in found:
            table_row(s, name)  # raises NotFound naming the table
        out[name] = found[key]
    return out


def _partitions(s: Session, wanted: Mapping[str, tuple[int, Sequence[str] | None]]) -> dict[int, dict[str, tuple]]:
    """(id, value, bucket_num, visible_version) of the partitions asked for (a table's all when
    None), by table id and value, in as few statements as the bound-value limit allows."""
    P = m.Partition
    conds: list[tuple[int, object]] = []  # (bound values, condition)
    for tid, values in wanted.values():
        if values is None:
            conds.append((1, P.table_id == tid))
        for i in range(0, len(values or ()), _PARAMS):
            chunk = list(values[i:i + _PARAMS])
            conds.append((len(chunk) + 1, and_(P.table_id == tid, P.value.in_(chunk))))
    out: dict[int, dict[str, tuple]] = {tid: {} for tid, _ in wanted.values()}
    batch, size = [], 0
    for n, cond in [*conds, (_PARAMS + 1, None)]:  # a sentinel flushes the last batch
        if batch and (size + n > _PARAMS or cond is None):
            V = m.PartitionVersion
            q = (select(P.id, P.table_id, P.value, P.bucket_num, P.visible_version, V.layout_buckets)
                 .outerjoin(V, and_(V.partition_id == P.id, V.version == P.visible_version))
                 .where(or_(*batch)).order_by(P.value))
            for pid, tid, value, bnum, visible, fine in s.execute(q):
                out[tid][value] = (pid, value, bnum, visible, fine or 0)
            batch, size = [], 0
        if cond is not None:
            batch.append(cond)
            size += n
    return out


def _check_committed(s: Session, view: TableView, by_value: dict[str, tuple], wanted: Sequence[str] | None) -> None:
    for value in wanted or ():
        p = by_value.get(value)
        if p is None or not p[3]:
            have = ", ".join(s.scalars(select(m.Partition.value).where(
                m.Partition.table_id == view.id, m.Partition.visible_version > 0).order_by(m.Partition.value))) or "none"
            raise NotFound(f"partition {value!r} of {view.qualified_name} has no committed data; committed partitions: {have}")


def _replicas(s: Session, bucket_num: dict[int, int], pids: list[int]) -> dict[int, tuple[tuple[ReplicaView, ...], ...]]:
    """The verified replicas of each partition's visible version, per bucket, in replica id order
    (what Reads.replicas returns), for every table of the query at once."""
    buckets: dict[int, list[list[ReplicaView]]] = {pid: [[] for _ in range(bucket_num[pid])] for pid in pids}
    R = m.Replica
    for i in range(0, len(pids), _PARAMS):
        q = (select(R.partition_id, R.bucket_seq, R.backend_id, R.path, R.rows, R.bytes, R.checksum, R.state, R.id, R.files)
             .join(m.Partition, VISIBLE).where(R.partition_id.in_(pids[i:i + _PARAMS]), R.state == "verified")
             .order_by(R.id))
        for pid, seq, be, path, rows, size, checksum, state, rid, files in s.connection().execute(q):
            buckets[pid][seq].append(ReplicaView(seq, be, path, rows, size, checksum, state, rid,
                                                 None if files is None else tuple((n, int(b)) for n, b in files)))
    return {pid: tuple(tuple(b) for b in per) for pid, per in buckets.items()}


def _groups(s: Session, group_ids: set[str]) -> dict[str, GroupView]:
    """The groups (``dbId.grpId``) with their normal tables and bucket maps: three statements."""
    ids = sorted({int(g.split(".")[1]) for g in group_ids})
    if not ids:
        return {}
    G, T, B = m.ColocateGroup, m.Table, m.BucketMap
    tables: dict[int, list[int]] = {gid: [] for gid in ids}
    for tid, gid in s.execute(select(T.id, T.group_id).where(T.group_id.in_(ids), T.state == "normal").order_by(T.id)):
        tables[gid].append(tid)
    maps: dict[int, list[tuple[int, ...]]] = {gid: [] for gid in ids}
    for gid, ids_ in s.execute(select(B.group_id, B.backend_ids).where(B.group_id.in_(ids)).order_by(B.group_id, B.bucket_seq)):
        maps[gid].append(tuple(ids_))
    out = {}
    q = select(G.id, G.db_id, G.name, G.dist_col_types, G.bucket_num, G.replication_num, G.stable, G.unstable_reason,
               G.version, G.join_policy, G.layout_buckets).where(G.id.in_(ids))
    for gid, db_id, name, types, bnum, rnum, stable, reason, version, policy, layout in s.execute(q):
        g = GroupView(db_id=db_id or 0, grp_id=gid, name=name, dist_col_types=tuple(types), bucket_num=bnum,
                      replication_num=rnum, stable=stable, unstable_reason=reason, version=version,
                      table_ids=tuple(tables[gid]), bucket_map=tuple(maps[gid]), join_policy=policy or "stable",
                      layout_buckets=layout or 0)
        out[g.group_id] = g
    return out


__all__ = ["QueryReads", "query_reads"]
