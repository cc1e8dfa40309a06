"""Everything the balance planner reads, in one consistent transaction: the backends' health,
every group's map, bucket sizes, repairs and redundant replicas from the summaries, the bytes of
tables outside any group, the flags. Its size grows with groups x buckets x backends, never with
days of history."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.buckets import Buckets, load_buckets, whole
from airflow_colocate.catalog.health import _health
from airflow_colocate.catalog.rows import active_job, group_view, map_of
from airflow_colocate.catalog.session import FLAGS
from airflow_colocate.catalog.summary import VISIBLE
from airflow_colocate.model.views import ClusterSnapshot, GroupSnapshot


def cluster_snapshot(s: Session, now: datetime, relocate_delay: timedelta) -> ClusterSnapshot:
    """The balance planner's input at ``now``: backends past ``relocate_delay`` count as unavailable."""
    backends = tuple(_health(b, now, relocate_delay) for b in s.scalars(select(m.Backend).order_by(m.Backend.id)))
    alive = {b.id for b in backends if b.alive}
    groups = []
    in_group: set[int] = set()
    for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id)):
        view = group_view(s, g)
        bucket_map = map_of(s, g.id)
        bk = load_buckets(s, g)
        in_group.update(bk.tables)
        sizes = [0] * g.bucket_num
        for (_, seq), size in bk.sizes.items():
            if seq < min(g.bucket_num, len(bucket_map)):
                sizes[seq] += size
        repairs = sum(bk.deficit(t, seq, be) for t in bk.tables for seq, row in enumerate(bucket_map)
                      for be in row if be in alive)
        job = active_job(s, g.id)
        groups.append(GroupSnapshot(grp_id=g.id, group_id=view.group_id, full_name=view.full_name,
                                    bucket_num=g.bucket_num, replication_num=g.replication_num,
                                    bucket_map=tuple(tuple(r) for r in bucket_map), bucket_bytes=tuple(sizes),
                                    active_job=job.id if job else None, repairs=repairs,
                                    redundant=_redundant(s, bk, bucket_map)))
    other: dict[int, int] = defaultdict(int)
    q = (select(m.BucketReplicas.table_id, m.BucketReplicas.backend_id, func.sum(m.BucketReplicas.bytes))
         .group_by(m.BucketReplicas.table_id, m.BucketReplicas.backend_id))
    for table_id, be, size in s.execute(q):
        if table_id not in in_group and size:
            other[be] += int(size)
    flags = {f: False for f in FLAGS}
    flags.update({r.name: r.value for r in s.scalars(select(m.Flag))})
    return ClusterSnapshot(now=now, relocate_delay=relocate_delay, backends=backends, groups=tuple(groups),
                           other_bytes=dict(other), flags=flags)


def _redundant(s: Session, bk: Buckets, bucket_map: list[list[int]]) -> int:
    """Replicas (verified or bad) of visible versions on backends the map does not name, in
    buckets that are whole on the map (what a finished job marks for dropping)."""
    extras: dict[tuple[int, int], int] = defaultdict(int)
    for (t, seq, be), (v, _, bad) in bk.counts.items():
        if t in bk.tables and seq < len(bucket_map) and be not in bucket_map[seq]:
            extras[(t, seq)] += v + bad
    n = 0
    for (t, seq), extra in sorted(extras.items()):
        row = bucket_map[seq]
        if not extra:
            continue
        if all(bk.deficit(t, seq, be) == 0 for be in row):
            n += extra
            continue
        n += s.scalar(select(func.count()).select_from(m.Replica).join(m.Partition, VISIBLE).where(
                m.Replica.table_id == t, m.Replica.bucket_seq == seq, m.Replica.backend_id.not_in(row),
                m.Replica.state.in_(("verified", "bad")), whole(seq, row)))
    return n
