"""Tables and partitions: create against the group schema, move between groups, drop/recover/purge."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog import summary
from airflow_colocate.catalog.availability import MAX_LISTED, Availability, TableAvailability, unavailable
from airflow_colocate.catalog.checks import (
    check_cgs,
    check_col_list,
    check_columns,
    check_counts,
    check_duration,
    check_replication_vs_backends,
)
from airflow_colocate.catalog.groups import create_group, maybe_remove_group
from airflow_colocate.catalog.rows import (
    DEFAULT_DB,
    find_group,
    full_name,
    group_view,
    table_row,
    table_view,
)
from airflow_colocate.catalog.schemas import check_retention, record_version
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.model.views import TableView
from airflow_colocate.core import naming
from airflow_colocate.core.errors import (
    AlreadyExists,
    InvalidArgument,
    SchemaMismatch,
)
from airflow_colocate.core.times import utc
from airflow_colocate.storage import layout

DEFAULT_RETENTION = timedelta(days=1)


def _purge_paths(s: Session, t: m.Table) -> list[str]:
    """What gc deletes for a purged table: its directory on every backend that holds a replica
    of it (one tree per backend, not one path per replica row), and any replica kept elsewhere."""
    db = s.get(m.Database, t.db_id).name
    paths = set()
    holders = s.execute(select(m.Backend.id, m.Backend.root_uri).where(
        exists().where(m.Replica.table_id == t.id, m.Replica.backend_id == m.Backend.id)).order_by(m.Backend.id))
    for be, root in holders:
        tree = layout.table_dir(root, db, t.name, t.id)
        paths.add(tree)
        paths.update(s.scalars(select(m.Replica.path).where(
            m.Replica.table_id == t.id, m.Replica.backend_id == be,
            func.substr(m.Replica.path, 1, len(tree) + 1) != tree + "/")))
    return sorted(paths)


def _refuse_if_published(s: Session, t: m.Table, label: str) -> None:
    """Purging forgets the pins that keep the files an Iceberg table names: it waits until that
    Iceberg table is dropped (``jobs.tables.drop_table`` / ``purge_tables`` drop it first)."""
    if s.get(m.IcebergPublication, t.id) is not None:
        raise InvalidArgument(f"table {label} is published as an Iceberg table: its Iceberg table is dropped before "
                              f"the table is purged ('colocate table drop --force' or 'colocate table purge' do both)")


class Tables:
    """Tables and partitions: create against the group schema, move between groups, drop/recover/purge."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def create(self, name: str, columns: Sequence[tuple[str, str]], dist_cols: Sequence[str], *,
                     bucket_num: int, replication_num: int = 1, partition_cols: Sequence[str] = (),
                     colocate_with: str | None = None, db: str | None = None,
                     if_not_exists: bool = False, retention_days: int | None = None) -> TableView:
        """Create a table; with ``colocate_with`` join that group or found it as its parent table.
        ``retention_days``: partitions dated older than that are dropped by the maintenance DAG."""
        db_name, table_name = naming.split_qualified(name, db or DEFAULT_DB)
        cols = check_columns(columns)
        col_types = dict(cols)
        dist = check_col_list("distribution", dist_cols, col_types, required=True)
        parts = check_col_list("partition", partition_cols, col_types, required=False)
        if len(parts) > 1:
            raise InvalidArgument(
                f"a table takes at most one partition column, got {', '.join(parts)}: partition by the load date "
                f"(e.g. 'dt') and keep other columns as data"
            )
        if set(dist) & set(parts):
            raise InvalidArgument(
                f"column(s) {', '.join(sorted(set(dist) & set(parts)))} cannot be both a distribution and a partition "
                f"column: bucket on a key such as an id, partition on a date"
            )
        check_counts(bucket_num, replication_num)
        check_retention(retention_days)
        if retention_days is not None and not parts:
            raise InvalidArgument(f"cannot set a retention on {db_name}.{table_name}: it is not partitioned, and retention "
                                  f"drops partitions by their date value (partition by a date column such as 'dt')")
        if colocate_with == "":
            colocate_with = None
        if colocate_with is not None:
            naming.check_group_name(colocate_with)
        dist_types = [col_types[c] for c in dist]

        def run(s: Session) -> TableView:
            db_id = self.db.database_id(s, db_name, create=True)
            existing = s.scalar(select(m.Table).where(m.Table.db_id == db_id, m.Table.name == table_name, m.Table.state == "normal"))
            if existing is not None:
                if if_not_exists:
                    return table_view(s, existing)
                raise AlreadyExists(f"table {db_name}.{table_name} already exists (id {existing.id}): drop it first or use if_not_exists")
            check_replication_vs_backends(s, replication_num)
            group = None
            if colocate_with is not None:
                group = find_group(s, colocate_with, db_id)
                if group is None:
                    group = create_group(self.db, s, colocate_with, db_id, dist_types, bucket_num, replication_num)
                else:
                    check_cgs(group, f"table {db_name}.{table_name}", dist_types, bucket_num, replication_num)
            t = m.Table(db_id=db_id, name=table_name, columns=[list(c) for c in cols], dist_cols=dist,
                        partition_cols=parts, bucket_num=bucket_num, replication_num=replication_num,
                        group_id=group.id if group else None, state="normal", created_at=self.db.now(),
                        schema_version=1, retention_days=retention_days)
            s.add(t)
            s.flush()
            record_version(s, t, None, t.created_at)
            if group is not None:
                group.version += 1
                group.generation += 1
                if group.iceberg_warehouse:  # the group publishes its tables: its first write publishes this one
                    s.add(m.IcebergPublication(table_id=t.id, enabled=True, warehouse=group.iceberg_warehouse,
                                               namespace=db_name, created_at=self.db.now()))
            self.db.event(s, "table.create", f"{db_name}.{table_name}", id=t.id, group=full_name(group) if group else None,
                        bucket_num=bucket_num, replication_num=replication_num, dist_cols=dist, partition_cols=parts,
                        retention_days=retention_days)
            return table_view(s, t)

        return self.db.tx(run)

    def get(self, ref: str | int, *, db: str | None = None) -> TableView:
        return self.db.tx(lambda s: table_view(s, table_row(s, ref, db)))

    def list(self, *, include_dropped: bool = False) -> list[TableView]:
        def run(s: Session) -> list[TableView]:
            q = select(m.Table).order_by(m.Table.id)
            if not include_dropped:
                q = q.where(m.Table.state == "normal")
            return [table_view(s, t) for t in s.scalars(q)]

        return self.db.tx(run)

    def unavailable(self, ref: str | int, *, db: str | None = None, limit: int = MAX_LISTED) -> TableAvailability:
        """The table's partitions no read can serve now (a bucket's verified replicas all on backends
        that are not alive; :mod:`.availability`): the count, the first ``limit`` values by value."""
        def run(s: Session) -> TableAvailability:
            t = table_row(s, ref, db)
            found = unavailable(s, [t.id], limit=limit).tables.get(t.id)
            return found or TableAvailability(table_id=t.id, table=table_view(s, t).qualified_name, count=0,
                                              partitions=(), backends=())

        return self.db.tx(run)

    def availability(self, *, limit: int = MAX_LISTED) -> Availability:
        """:meth:`unavailable` of every live table with such a partition, and per backend how many
        partitions are unavailable with it (what its replicas outside the groups mean now)."""
        return self.db.tx(lambda s: unavailable(s, limit=limit))

    def alter_colocate_with(self, ref: str, colocate_with: str, *, db: str | None = None) -> TableView:
        """Move a table to another group (created if missing), or out of its group with ``""``."""
        if colocate_with != "":
            naming.check_group_name(colocate_with)

        def run(s: Session) -> TableView:
            t = table_row(s, ref, db)
            old_group = t.group_id
            label = f"{table_view(s, t).qualified_name}"
            if colocate_with == "":
                if old_group is None:
                    return table_view(s, t)
                t.group_id = None
            else:
                target = find_group(s, colocate_with, t.db_id)
                dist_types = [dict(map(tuple, t.columns))[c] for c in t.dist_cols]
                if target is None:
                    check_replication_vs_backends(s, t.replication_num)
                    target = create_group(self.db, s, colocate_with, t.db_id, dist_types, t.bucket_num, t.replication_num)
                else:
                    if target.id == old_group:
                        return table_view(s, t)
                    check_cgs(target, f"table {label}", dist_types, t.bucket_num, t.replication_num)
                    for p in s.scalars(select(m.Partition).where(m.Partition.table_id == t.id)):
                        check_cgs(target, f"partition {p.value} of table {label}", dist_types, p.bucket_num, p.replication_num)
                t.group_id = target.id
                target.version += 1
                target.generation += 1
                if target.iceberg_warehouse and s.get(m.IcebergPublication, t.id) is None:  # its next commit publishes it
                    s.add(m.IcebergPublication(table_id=t.id, enabled=True, warehouse=target.iceberg_warehouse,
                                               namespace=table_view(s, t).db, created_at=self.db.now()))
                has_data = s.scalar(select(func.count()).select_from(m.Partition).where(
                    m.Partition.table_id == t.id, m.Partition.visible_version > 0))
                if has_data:
                    # Its replicas sit where its old placement put them; a balance moves them.
                    target.stable = False
                    target.unstable_reason = f"table {label} joined the group; its replicas must be moved onto the group's bucket map by a balance"
            if old_group is not None:
                g = s.get(m.ColocateGroup, old_group)
                g.version += 1
                g.generation += 1
            self.db.event(s, "table.alter_colocate_with", label, old_group=full_name(s.get(m.ColocateGroup, old_group)) if old_group else None,
                          new_group=full_name(target) if colocate_with else None)
            s.flush()
            maybe_remove_group(self.db, s, old_group)
            return table_view(s, t)

        return self.db.tx(run)

    def set_replication_num(self, ref: str, replication_num: int, *, db: str | None = None) -> TableView:
        check_counts(1, replication_num)

        def run(s: Session) -> TableView:
            t = table_row(s, ref, db)
            label = table_view(s, t).qualified_name
            if t.group_id is not None:
                g = s.get(m.ColocateGroup, t.group_id)
                if replication_num != g.replication_num:
                    raise SchemaMismatch(
                        f"cannot set replication_num of {label} to {replication_num}: it is in colocation group "
                        f"{group_view(s, g).full_name}, whose schema fixes replication_num = {g.replication_num}; "
                        f"take the table out of the group first (colocate_with = \"\")"
                    )
                return table_view(s, t)
            check_replication_vs_backends(s, replication_num)
            self.db.event(s, "table.set_replication_num", label, old=t.replication_num, new=replication_num)
            t.replication_num = replication_num
            return table_view(s, t)

        return self.db.tx(run)

    def drop(self, ref: str, *, db: str | None = None, force: bool = False) -> TableView:
        """Drop a table; it stays recoverable for the retention unless ``force`` purges it now."""
        def run(s: Session) -> TableView:
            t = table_row(s, ref, db)
            t.state, t.dropped_at = "dropped", self.db.now()
            if t.group_id is not None:
                g = s.get(m.ColocateGroup, t.group_id)
                g.version += 1
                g.generation += 1
            view = table_view(s, t)
            self.db.event(s, "table.drop", view.qualified_name, id=t.id, force=force)
            if force:
                _refuse_if_published(s, t, view.qualified_name)
                self._purge(s, t)
            return view

        return self.db.tx(run)

    def recover(self, ref: str, *, db: str | None = None) -> TableView:
        def run(s: Session) -> TableView:
            t = table_row(s, ref, db, state="dropped")
            label = table_view(s, t).qualified_name
            clash = s.scalar(select(m.Table).where(m.Table.db_id == t.db_id, m.Table.name == t.name, m.Table.state == "normal"))
            if clash is not None:
                raise AlreadyExists(f"cannot recover {label}: a new table of that name exists (id {clash.id}); drop or rename it first")
            t.state, t.dropped_at = "normal", None
            if t.group_id is not None:
                g = s.get(m.ColocateGroup, t.group_id)
                g.version += 1
                g.generation += 1
            self.db.event(s, "table.recover", label, id=t.id)
            return table_view(s, t)

        return self.db.tx(run)

    def purge_dropped(self, *, retention: timedelta = DEFAULT_RETENTION) -> list[TableView]:
        """Erase tables dropped longer than ``retention`` ago (and any group they leave empty)."""
        check_duration("retention", retention, "24 hours, the default")
        def run(s: Session) -> list[TableView]:
            cutoff = self.db.now() - retention
            purged = []
            published = select(m.IcebergPublication.table_id)  # its Iceberg table is dropped first (jobs/tables.py)
            for t in list(s.scalars(select(m.Table).where(m.Table.state == "dropped", m.Table.id.not_in(published))
                                    .order_by(m.Table.id))):
                if utc(t.dropped_at) <= cutoff:
                    purged.append(table_view(s, t))
                    self._purge(s, t)
            return purged

        return self.db.tx(run)

    def purge(self, table_id: int) -> TableView:
        """Purge one dropped table now (``table drop --force`` of a published table, once its
        Iceberg table is gone)."""
        def run(s: Session) -> TableView:
            t = table_row(s, table_id, state="dropped")
            view = table_view(s, t)
            _refuse_if_published(s, t, view.qualified_name)
            self._purge(s, t)
            return view

        return self.db.tx(run)

    def _purge(self, s: Session, t: m.Table) -> None:
        group_id = t.group_id
        label = table_view(s, t).qualified_name
        replicas = s.scalar(select(func.count()).select_from(m.Replica).where(m.Replica.table_id == t.id))
        paths = _purge_paths(s, t)
        part_ids = list(s.scalars(select(m.Partition.id).where(m.Partition.table_id == t.id)))
        s.execute(delete(m.Replica).where(m.Replica.table_id == t.id))
        if part_ids:
            s.execute(delete(m.PartitionVersion).where(m.PartitionVersion.partition_id.in_(part_ids)))
        s.execute(delete(m.Partition).where(m.Partition.table_id == t.id))
        s.execute(delete(m.TableSchema).where(m.TableSchema.table_id == t.id))
        summary.forget_table(s, t.id)
        summary.touch_groups(s, [group_id])
        s.delete(t)
        s.flush()
        # The files go after the rows: a pending gc job tells 'colocate gc' which paths are garbage.
        if paths:
            s.add(m.Job(kind="gc", group_id=None, state="pending", plan={"paths": paths, "table": label},
                        progress={}, created_at=self.db.now(), updated_at=self.db.now()))
        self.db.event(s, "table.purge", label, id=t.id, replicas=replicas)
        maybe_remove_group(self.db, s, group_id)

