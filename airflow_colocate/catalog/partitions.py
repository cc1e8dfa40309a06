"""Partition lifecycle: drop into the recycle bin, recover, purge, and the tables' retention.

A dropped partition keeps its rows and files; only its visible version moves aside
(``dropped_version``, ``visible_version = 0``, ``dropped_at``), inside :func:`summary.tracking`,
so it leaves reads, the bucket summaries, stability, balance and verify at once, and recover puts
the same version back (identical rows). Purging it (after the recycle-bin window, or at once with
``force``) marks that version superseded: ``writes.garbage()`` returns its directories after the
usual grace, so a read that listed its replicas before the drop still finds its files.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.checks import (
    check_cgs,
    check_counts,
    check_duration,
    check_partition_of,
    check_replication_vs_backends,
)
from airflow_colocate.catalog.rows import partition_view, table_row, table_view
from airflow_colocate.catalog.schemas import check_retention, check_retention_of
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.catalog.summary import tracking
from airflow_colocate.model.views import PartitionView, TableView
from airflow_colocate.core import naming
from airflow_colocate.core.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from airflow_colocate.core.times import utc

# How long a dropped partition stays recoverable (like a dropped table's).
DEFAULT_RECYCLE_BIN = timedelta(days=1)

_DAY = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})(?:[ T].*)?")


def partition_date(value: str) -> date | None:
    """The day a partition value names ('2026-11-01', '20261101', '2026-11-01 00:00:00'); None when
    it names none (such a partition is never expired)."""
    found = _DAY.fullmatch(value.strip())
    if found is None:
        return None
    try:
        return date(int(found.group(1)), int(found.group(2)), int(found.group(3)))
    except ValueError:
        return None


@dataclass(frozen=True)
class Expired:
    table: str
    partition: str
    retention_days: int


class Partitions:
    """The partitions of a table: list, drop into the recycle bin, recover, purge, expire by retention."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def list(self, ref: str | int, *, dropped: bool = False, empty: bool = False,
             db: str | None = None) -> list[PartitionView]:
        """The committed partitions, or (``dropped``) those in the recycle bin; ``empty`` adds the
        partitions that were added but have no committed version yet."""
        def run(s: Session) -> list[PartitionView]:
            t = table_row(s, ref, db)
            q = select(m.Partition).where(m.Partition.table_id == t.id)
            if dropped:
                q = q.where(m.Partition.dropped_at.is_not(None))
            else:
                q = q.where(m.Partition.dropped_at.is_(None) if empty else m.Partition.visible_version > 0)
            return [partition_view(p) for p in s.scalars(q.order_by(m.Partition.value))]

        return self.db.tx(run)

    def add(self, ref: str, value: str, *, bucket_num: int | None = None,
                      replication_num: int | None = None, db: str | None = None,
                      if_not_exists: bool = False) -> PartitionView:
        """Add a partition, checked against the group schema: bucket count and replication number."""
        naming.check_partition_value(value)

        def run(s: Session) -> PartitionView:
            t = table_row(s, ref, db)
            label = table_view(s, t).qualified_name
            if not t.partition_cols:
                if value != "all":
                    raise InvalidArgument(f"table {label} is not partitioned: its single partition is called 'all', not {value!r}")
            check_partition_of(t, value)
            existing = s.scalar(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.value == value))
            if existing is not None:
                if if_not_exists:
                    return partition_view(existing)
                raise AlreadyExists(f"partition {value!r} of {label} already exists")
            buckets = t.bucket_num if bucket_num is None else bucket_num
            replicas = t.replication_num if replication_num is None else replication_num
            check_counts(buckets, replicas)
            if t.group_id is not None:
                g = s.get(m.ColocateGroup, t.group_id)
                dist_types = [dict(map(tuple, t.columns))[c] for c in t.dist_cols]
                check_cgs(g, f"partition {value} of table {label}", dist_types, buckets, replicas)
            else:
                check_replication_vs_backends(s, replicas)
            p = m.Partition(table_id=t.id, value=value, bucket_num=buckets, replication_num=replicas,
                            visible_version=0, next_version=1, created_at=self.db.now())
            s.add(p)
            s.flush()
            self.db.event(s, "partition.add", f"{label}/{value}", bucket_num=buckets, replication_num=replicas)
            return partition_view(p)

        return self.db.tx(run)

    def set_retention(self, ref: str | int, days: int | None, *, db: str | None = None) -> TableView:
        """Keep partitions dated within ``days`` (None: keep every partition)."""
        check_retention(days)

        def run(s: Session) -> TableView:
            t = table_row(s, ref, db)
            label = table_view(s, t).qualified_name
            check_retention_of(t, label, days)
            if t.retention_days == days:
                return table_view(s, t)
            self.db.event(s, "table.set_retention", label, id=t.id, old=t.retention_days, new=days)
            t.retention_days = days
            return table_view(s, t)

        return self.db.tx(run)

    def recycle_bin(self) -> dict[int, list[PartitionView]]:
        """Every table's dropped partitions (table id -> partitions by value), in one query on the
        recycle bin's partial index: for the Colocation page."""
        def run(s: Session) -> dict[int, list[PartitionView]]:
            out: dict[int, list[PartitionView]] = {}
            q = (select(m.Partition).where(m.Partition.dropped_at.is_not(None))
                 .order_by(m.Partition.table_id, m.Partition.value))
            for p in s.scalars(q):
                out.setdefault(p.table_id, []).append(partition_view(p))
            return out

        return self.db.tx(run)

    def drop(self, ref: str | int, value: str, *, force: bool = False, db: str | None = None) -> PartitionView:
        """Drop a committed partition into the recycle bin (``force``: purge it now; gc still waits
        the grace before erasing its files)."""
        def run(s: Session) -> PartitionView:
            t = table_row(s, ref, db)
            label = table_view(s, t).qualified_name
            p = s.scalar(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.value == value))
            if p is not None and p.dropped_at is not None:
                if not force:
                    raise AlreadyExists(f"partition {value!r} of {label} is already in the recycle bin: "
                                        f"'colocate partition recover {label} {value}' brings it back")
            elif p is None or not p.visible_version:
                raise NotFound(f"partition {value!r} of {label} has no committed data to drop; committed partitions: "
                               f"{_committed(s, t.id)}")
            else:
                self._drop_in(s, t, [p], label, reason="drop")
            if force:
                self._purge_in(s, p, label)
            return partition_view(p)

        return self.db.tx(run)

    def _drop_in(self, s: Session, t: m.Table, parts: list[m.Partition], label: str, *, reason: str, **detail) -> None:
        with tracking(s, partitions=[p.id for p in parts]):  # their buckets leave the summaries with their versions
            for p in parts:
                p.dropped_version, p.visible_version, p.dropped_at = p.visible_version, 0, self.db.now()
        if len(parts) > 1:  # one transaction: its events share a batch, which one Iceberg snapshot replays
            detail["batch"] = f"drop-{uuid.uuid4().hex[:16]}"
        for p in parts:
            self.db.event(s, "partition.drop", f"{label}/{p.value}", version=p.dropped_version, reason=reason, **detail)

    def _purge_in(self, s: Session, p: m.Partition, label: str) -> None:
        pv = s.get(m.PartitionVersion, (p.id, p.dropped_version))
        if pv is not None and pv.state == "committed":
            pv.state, pv.finished_at = "superseded", self.db.now()  # gc erases it after its grace
        self.db.event(s, "partition.purge", f"{label}/{p.value}", version=p.dropped_version)
        p.dropped_version, p.dropped_at = None, None

    def recover(self, ref: str | int, value: str, *, db: str | None = None) -> PartitionView:
        """Make the dropped version visible again: the same files, the same rows."""
        def run(s: Session) -> PartitionView:
            t = table_row(s, ref, db)
            label = table_view(s, t).qualified_name
            p = s.scalar(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.value == value))
            if p is None or p.dropped_at is None:
                bin_ = ", ".join(s.scalars(select(m.Partition.value).where(
                    m.Partition.table_id == t.id, m.Partition.dropped_at.is_not(None)).order_by(m.Partition.value))) or "none"
                raise NotFound(f"partition {value!r} of {label} is not in the recycle bin (dropped partitions: {bin_}); "
                               f"a purged partition cannot be recovered")
            if p.visible_version:
                raise Conflict(f"cannot recover partition {value!r} of {label}: it was written again since the drop "
                               f"(v{p.visible_version})")
            with tracking(s, partitions=[p.id]):
                p.visible_version, p.dropped_version, p.dropped_at = p.dropped_version, None, None
            self.db.event(s, "partition.recover", f"{label}/{value}", version=p.visible_version)
            return partition_view(p)

        return self.db.tx(run)

    def purge_dropped(self, *, retention: timedelta = DEFAULT_RECYCLE_BIN) -> list[tuple[str, PartitionView]]:
        """Purge partitions dropped longer than ``retention`` ago; gc erases their files after its grace."""
        check_duration("recycle-bin window", retention, "24 hours, the default")

        def run(s: Session) -> list[tuple[str, PartitionView]]:
            cutoff = self.db.now() - retention
            out = []
            due = s.scalars(select(m.Partition).where(m.Partition.dropped_at.is_not(None), m.Partition.dropped_at <= cutoff)
                            .order_by(m.Partition.table_id, m.Partition.value))
            labels: dict[int, str] = {}
            for p in list(due):
                if utc(p.dropped_at) > cutoff:
                    continue
                if p.table_id not in labels:
                    labels[p.table_id] = table_view(s, s.get(m.Table, p.table_id)).qualified_name
                view = partition_view(p)
                self._purge_in(s, p, labels[p.table_id])
                out.append((labels[p.table_id], view))
            return out

        return self.db.tx(run)

    def expire(self, *, today: date | None = None, table: str | int | None = None,
               db: str | None = None) -> list[Expired]:
        """Apply every table's retention (or one table's): drop into the recycle bin each committed
        partition whose value names a day before ``today - retention_days`` (``today``: the
        catalog clock's date). One transaction per table."""
        def tables(s: Session) -> list[int]:
            if table is not None:
                return [table_row(s, table, db).id]
            return list(s.scalars(select(m.Table.id).where(m.Table.state == "normal", m.Table.retention_days.is_not(None))
                                  .order_by(m.Table.id)))

        out: list[Expired] = []
        for table_id in self.db.tx(tables):
            def run(s: Session, table_id: int = table_id) -> list[Expired]:
                t = s.get(m.Table, table_id)
                if t is None or t.state != "normal" or not t.retention_days:
                    return []
                day = today or utc(self.db.now()).date()
                cutoff = day - timedelta(days=t.retention_days)
                label = table_view(s, t).qualified_name
                parts = s.scalars(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.visible_version > 0)
                                  .order_by(m.Partition.value))
                old = [p for p in parts if (when := partition_date(p.value)) is not None and when < cutoff]
                if old:
                    self._drop_in(s, t, old, label, reason="retention", retention_days=t.retention_days,
                                  cutoff=cutoff.isoformat())
                return [Expired(label, p.value, t.retention_days) for p in old]

            out += self.db.tx(run)
        return out


def _committed(s: Session, table_id: int) -> str:
    values = list(s.scalars(select(m.Partition.value).where(m.Partition.table_id == table_id, m.Partition.visible_version > 0)
                            .order_by(m.Partition.value).limit(20)))
    return ", ".join(values) or "none"


__all__ = ["DEFAULT_RECYCLE_BIN", "Expired", "Partitions", "partition_date"]
