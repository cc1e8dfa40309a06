"""The rows every repository resolves: a backend, group or table named by a user, and the plain
views handed out for them. Functions of one SQLAlchemy session, shared by the repositories so that
none of them reaches into another's helpers."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.summary import chunks, fetch, key_chunks, replica_keys
from airflow_colocate.model.views import (
    ACTIVE,
    BALANCE_KINDS,
    BackendView,
    GroupView,
    PartitionView,
    TableView,
    group_full_name,
    split_reason,
)
from airflow_colocate.core import naming
from airflow_colocate.core.validate import MAX_ID
from airflow_colocate.core.errors import NotFound
from airflow_colocate.core.times import utc

DEFAULT_DB = "default"


def backend_view(b: m.Backend) -> BackendView:
    reason, source = split_reason(b.state_reason)
    return BackendView(id=b.id, name=b.name, root_uri=b.root_uri, host=b.host, capacity_bytes=b.capacity_bytes,
                       state=b.state, state_since=utc(b.state_since), last_heartbeat=utc(b.last_heartbeat),
                       state_reason=reason, reason_source=source, last_probe_at=utc(b.last_probe_at),
                       last_probe_ok=b.last_probe_ok, last_probe_detail=b.last_probe_detail)


def partition_view(p: m.Partition) -> PartitionView:
    return PartitionView(id=p.id, table_id=p.table_id, value=p.value, bucket_num=p.bucket_num,
                         replication_num=p.replication_num, visible_version=p.visible_version,
                         dropped_version=p.dropped_version, dropped_at=utc(p.dropped_at))


def as_id(ref: object) -> int | None:
    """``ref`` as a row id: an int, or ASCII digits, that a 64-bit column can hold; else None
    (a name, or a number no row can have)."""
    if isinstance(ref, bool):
        return None
    if isinstance(ref, str):
        if not ref.isascii() or not ref.isdigit():
            return None
        ref = int(ref)
    return ref if isinstance(ref, int) and 0 <= ref <= MAX_ID else None


def backend_row(s: Session, ref: int | str) -> m.Backend:
    """A backend by id or name; an unknown one is refused with the list of known backends."""
    row = None
    if (key := as_id(ref)) is not None:
        row = s.get(m.Backend, key)
    if row is None and isinstance(ref, str):
        row = s.scalar(select(m.Backend).where(m.Backend.name == ref))
    if row is None:
        known = ", ".join(f"{b.name} (id {b.id})" for b in s.scalars(select(m.Backend).order_by(m.Backend.id))) or "none"
        raise NotFound(f"unknown backend {ref!r}: known backends are {known}")
    return row


def full_name(g: m.ColocateGroup) -> str:
    """``GroupView.full_name`` from the row alone: an event's subject, without the view's query."""
    return group_full_name(g.db_id, g.name)


def group_view(s: Session, g: m.ColocateGroup, *, with_map: bool = False) -> GroupView:
    table_ids = tuple(s.scalars(select(m.Table.id).where(m.Table.group_id == g.id, m.Table.state == "normal").order_by(m.Table.id)))
    bucket_map: tuple[tuple[int, ...], ...] = ()
    if with_map:
        bucket_map = tuple(tuple(r) for r in map_of(s, g.id))
    return GroupView(db_id=g.db_id or 0, grp_id=g.id, name=g.name, dist_col_types=tuple(g.dist_col_types),
                     bucket_num=g.bucket_num, replication_num=g.replication_num, stable=g.stable,
                     unstable_reason=g.unstable_reason, version=g.version, table_ids=table_ids, bucket_map=bucket_map,
                     join_policy=g.join_policy or "stable", layout_buckets=g.layout_buckets or 0)


def find_group(s: Session, name: str, db_id: int) -> m.ColocateGroup | None:
    if naming.is_global_group(name):
        return s.scalar(select(m.ColocateGroup).where(m.ColocateGroup.db_id.is_(None), m.ColocateGroup.name == name))
    return s.scalar(select(m.ColocateGroup).where(m.ColocateGroup.db_id == db_id, m.ColocateGroup.name == name))


def group_row(s: Session, ref: str, db: str = DEFAULT_DB) -> m.ColocateGroup:
    """Resolve ``dbId.grpId``, a full name ``dbId_name``, or a name in ``db``."""
    row = None
    if isinstance(ref, str) and ref.count(".") == 1 and all(as_id(p) is not None for p in ref.split(".")):
        db_id, grp_id = (int(p) for p in ref.split("."))
        row = s.get(m.ColocateGroup, grp_id)
        if row is not None and (row.db_id or 0) != db_id:
            row = None
    elif isinstance(ref, str):
        head, _, rest = ref.partition("_")
        if as_id(head) is not None and rest:
            row = find_group(s, rest, int(head))
        if row is None and naming.is_name(ref):
            db_row = s.scalar(select(m.Database).where(m.Database.name == db))
            row = find_group(s, ref, db_row.id if db_row else -1)
    if row is None:
        known = ", ".join(f"{group_view(s, g).full_name} ({group_view(s, g).group_id})"
                          for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id))) or "none"
        raise NotFound(f"unknown colocation group {ref!r}: known groups are {known}")
    return row


def map_of(s: Session, grp_id: int) -> list[list[int]]:
    """A group's bucket map: one list of backend ids per bucket seq."""
    rows = s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == grp_id).order_by(m.BucketMap.bucket_seq))
    return [list(r.backend_ids) for r in rows]


def slot_load(s: Session, exclude_group: int | None = None) -> Counter:
    """Bucket-replica slots per backend over every group's map (what a new map spreads against)."""
    load: Counter = Counter()
    for gid, ids in s.execute(select(m.BucketMap.group_id, m.BucketMap.backend_ids)):
        if gid != exclude_group:
            load.update(ids)
    return load


def active_job(s: Session, grp_id: int, exclude: int | None = None) -> m.Job | None:
    """The balance job changing a group, if any (at most one runs per group)."""
    q = (select(m.Job).where(m.Job.group_id == grp_id, m.Job.kind.in_(BALANCE_KINDS), m.Job.state == ACTIVE)
         .order_by(m.Job.id))
    for job in s.scalars(q):
        if job.id != exclude:
            return job
    return None


def table_row(s: Session, ref: str | int, db: str | None = None, *, state: str = "normal") -> m.Table:
    if isinstance(ref, int):
        t = s.get(m.Table, ref) if as_id(ref) is not None else None
        if t is None or t.state != state:
            raise NotFound(f"unknown table id {ref}")
        return t
    db_name, table_name = naming.split_qualified(ref, db or DEFAULT_DB)
    q = select(m.Table).join(m.Database, m.Database.id == m.Table.db_id).where(
        m.Database.name == db_name, m.Table.name == table_name, m.Table.state == state).order_by(m.Table.dropped_at.desc())
    t = s.scalars(q).first()
    if t is None:
        if state == "dropped":
            raise NotFound(f"no dropped table {db_name}.{table_name} to recover: it was never dropped or its retention has passed")
        raise NotFound(f"unknown table {db_name}.{table_name}: 'colocate table list' shows the tables")
    return t


def table_view(s: Session, t: m.Table) -> TableView:
    db = s.get(m.Database, t.db_id)
    gv = group_view(s, s.get(m.ColocateGroup, t.group_id)) if t.group_id else None
    return TableView(id=t.id, db=db.name, name=t.name, columns=tuple(tuple(c) for c in t.columns),
                     dist_cols=tuple(t.dist_cols), partition_cols=tuple(t.partition_cols),
                     bucket_num=t.bucket_num, replication_num=t.replication_num,
                     group_id=gv.group_id if gv else None, group_name=gv.full_name if gv else None,
                     state=t.state, dropped_at=utc(t.dropped_at), schema_version=t.schema_version or 1,
                     retention_days=t.retention_days)


# Rows named by many ids at once, loaded in chunked IN queries (a drop pass checks thousands of
# replicas in one call).


def groups_of_tables(s: Session, table_ids: set[int]) -> dict[int, int | None]:
    out: dict[int, int | None] = {}
    for chunk in chunks(sorted(table_ids)):
        out.update((tid, gid) for tid, gid in s.execute(select(m.Table.id, m.Table.group_id).where(m.Table.id.in_(chunk))))
    return out


def bucket_maps(s: Session, group_ids: set[int]) -> dict[tuple[int, int], set[int]]:
    out: dict[tuple[int, int], set[int]] = {}
    for chunk in chunks(sorted(group_ids)):
        for row in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id.in_(chunk))):
            out[(row.group_id, row.bucket_seq)] = set(row.backend_ids or ())
    return out


def verified_backends(s: Session, buckets: set[tuple[int, int, int]]) -> dict[tuple[int, int, int], set[int]]:
    """(partition, version, bucket) -> the backends holding a verified replica of it."""
    out: dict[tuple[int, int, int], set[int]] = {}
    R = m.Replica
    for chunk in key_chunks(s, sorted(buckets)):
        q = select(R.partition_id, R.version, R.bucket_seq, R.backend_id).where(
            replica_keys(s, ("partition_id", "version", "bucket_seq"), chunk), R.state == "verified")
        for pid, ver, seq, be in fetch(s, q):
            out.setdefault((pid, ver, seq), set()).add(be)
    return out
