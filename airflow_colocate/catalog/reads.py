"""What reads need from the catalog: one table's replicas per bucket, and a whole query's tables,
groups, backends and flags in one read transaction. Reads never change the catalog."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.query_reads import QueryReads, query_reads
from airflow_colocate.catalog.rows import table_row, table_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.catalog.summary import VISIBLE
from airflow_colocate.core.errors import NotFound
from airflow_colocate.model.views import PartitionReplicas, ReplicaView, TableView


class Reads:
    """``catalog.reads``: the replicas a read may choose from."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def replicas(self, ref: str | int, partitions: Sequence[str] | None = None, *,
                 db: str | None = None) -> tuple[TableView, list[PartitionReplicas]]:
        """The visible version of each requested partition (all committed ones by default) with its
        verified replicas per bucket; the caller chooses one replica per bucket."""
        return self.db.tx(lambda s: _table_replicas(s, ref, partitions, db))

    def query(self, tables: Mapping[str, Sequence[str] | None]) -> QueryReads:
        """Everything a query's read planning needs, in ONE read transaction: each table's replicas
        (as :meth:`replicas`, by the name given), their groups with bucket maps, the backends,
        the flags. One snapshot instead of six transactions: the tables, groups and backends
        agree with each other, and a query pays one connection checkout and commit. Nothing is
        cached across calls (a commit or a backend marked down shows in the very next query)."""
        return self.db.tx(lambda s: query_reads(s, tables))


def _table_replicas(s: Session, ref: str | int, partitions: Sequence[str] | None,
                    db: str | None) -> tuple[TableView, list[PartitionReplicas]]:
    t = table_row(s, ref, db)
    view = table_view(s, t)
    q = (select(m.Partition.id, m.Partition.value, m.Partition.bucket_num, m.Partition.visible_version)
         .where(m.Partition.table_id == t.id).order_by(m.Partition.value))
    parts = {}
    if partitions is None:
        parts = {p.value: p for p in s.execute(q)}
    else:  # only the partitions asked for: a 30-day read of a 3-year table loads 30 rows
        for i in range(0, len(partitions), 500):
            parts.update((p.value, p) for p in s.execute(q.where(m.Partition.value.in_(list(partitions[i:i + 500])))))
    wanted = list(partitions) if partitions is not None else [v for v, p in parts.items() if p.visible_version]
    for value in wanted:
        p = parts.get(value)
        if p is None or not p.visible_version:
            have = ", ".join(s.scalars(select(m.Partition.value).where(
                m.Partition.table_id == t.id, m.Partition.visible_version > 0).order_by(m.Partition.value))) or "none"
            raise NotFound(f"partition {value!r} of {view.qualified_name} has no committed data; committed partitions: {have}")
    buckets: dict[int, list[list[ReplicaView]]] = {parts[v].id: [[] for _ in range(parts[v].bucket_num)] for v in wanted}
    ids = list(buckets)
    for i in range(0, len(ids), 500):
        q = (select(m.Replica.partition_id, m.Replica.bucket_seq, m.Replica.backend_id, m.Replica.path, m.Replica.rows,
                    m.Replica.bytes, m.Replica.checksum, m.Replica.state, m.Replica.id, m.Replica.files)
             .join(m.Partition, VISIBLE).where(m.Replica.partition_id.in_(ids[i:i + 500]), m.Replica.state == "verified")
             .order_by(m.Replica.id))
        found = s.connection().execute(q).all()  # plain rows: no ORM loading for thousands of them
        for pid, seq, be, path, rows, size, checksum, state, rid, files in found:
            buckets[pid][seq].append(ReplicaView(seq, be, path, rows, size, checksum, state, rid,
                                                 None if files is None else tuple((n, int(b)) for n, b in files)))
    return view, [PartitionReplicas(value=v, version=parts[v].visible_version,
                                    buckets=tuple(tuple(b) for b in buckets[parts[v].id])) for v in wanted]


__all__ = ["Reads"]
