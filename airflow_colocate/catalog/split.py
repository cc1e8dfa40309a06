"""Splitting a group's bucket layout: new versions bucket by k·N, the map keeps N entries.

Why the map keeps N entries: bucket j of the k·N layout holds a subset of the rows of bucket
j mod N (``pmod(h, k·N) mod N = pmod(h, N)``), so the k finer buckets of one family are written,
as k files, into the replica directory of map entry j mod N. Every replica row, summary, clone,
balance move, repair and stability check stays per family: they move whole families together,
never one finer bucket alone, and no committed file is rewritten or moved by a split. A join
reads family b of every table as one bucket at the count N, whatever layout each partition was
written with.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.checks import MAX_BUCKETS
from airflow_colocate.catalog.rows import group_row, group_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.core.errors import Conflict, InvalidArgument
from airflow_colocate.model.views import GroupView

MOVING = ("relocate", "balance", "repair")


def check_factor(factor: object, layout: int, name: str) -> int:
    """The new layout's bucket count, or a one-line refusal naming what would be right."""
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 2:
        raise InvalidArgument(f"invalid split factor {factor!r} for group {name}: expected an integer of at least 2 "
                              f"(e.g. 2 turns its {layout} buckets into {2 * layout})")
    if layout * factor > MAX_BUCKETS:
        raise InvalidArgument(f"invalid split factor {factor} for group {name}: {layout} buckets x {factor} = "
                              f"{layout * factor} exceeds the maximum bucket count {MAX_BUCKETS}; give a factor of "
                              f"at most {MAX_BUCKETS // layout}")
    return layout * factor


def split_group(db: CatalogSession, s: Session, ref: str, factor: object, db_name: str) -> GroupView:
    """Make the group's next versions use ``factor`` times its current layout, in the caller's
    transaction, with its event. Refused while a balance job changes the group: its clones copy
    whole families and would not see a layout that changed under them."""
    g = group_row(s, ref, db_name)
    name = group_view(s, g).full_name
    old = g.layout_buckets or g.bucket_num
    new = check_factor(factor, old, name)
    running = s.scalar(select(m.Job).where(m.Job.group_id == g.id, m.Job.kind.in_(MOVING), m.Job.state == "running")
                       .order_by(m.Job.id))
    if running is not None:
        raise Conflict(f"cannot split group {name}: balance job {running.id} ({running.kind}) is changing it; "
                       f"split it once the job has finished ('colocate jobs' shows it)")
    g.layout_buckets = new
    g.version += 1
    db.event(s, "group.split", name, factor=factor, old_layout=old, new_layout=new, map_buckets=g.bucket_num)
    return group_view(s, g, with_map=True)


def layout_counts(s: Session, group_ids: Sequence[int]) -> dict[int, dict[int, int]]:
    """Per group id: bucket count -> committed partitions of its live tables written at it (the
    visible version's layout), in one aggregate statement: what users see of a split's progress."""
    P, V, T = m.Partition, m.PartitionVersion, m.Table
    count = func.coalesce(V.layout_buckets, P.bucket_num)
    q = (select(T.group_id, count, func.count()).select_from(P).join(T, T.id == P.table_id)
         .outerjoin(V, and_(V.partition_id == P.id, V.version == P.visible_version))
         .where(T.group_id.in_(list(group_ids)), T.state == "normal", P.visible_version > 0)
         .group_by(T.group_id, count))
    out: dict[int, dict[int, int]] = {gid: {} for gid in group_ids}
    for gid, buckets, n in s.execute(q):
        out[gid][int(buckets)] = int(n)
    return out


__all__ = ["check_factor", "layout_counts", "split_group"]
