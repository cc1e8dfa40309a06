"""``catalog.iceberg``: which tables are published as Iceberg tables, how far each publication has
followed our commits, and the replica directories retained Iceberg snapshots name (gc's pins).

The Iceberg commit itself is not made here (``jobs/iceberg.py`` makes it through pyiceberg after
ours); this repository only records what it did, in transactions of their own, so nothing here
ever holds up or rolls back one of our commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.rows import DEFAULT_DB, group_row, group_view, table_row, table_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.core.errors import InvalidArgument, NotFound
from airflow_colocate.core import validate
from airflow_colocate.model.views import IcebergPublicationView


def _view(s: Session, p: m.IcebergPublication) -> IcebergPublicationView:
    t = s.get(m.Table, p.table_id)
    return IcebergPublicationView(p.table_id, table_view(s, t).qualified_name, p.enabled, p.warehouse, p.namespace,
                                  p.digest, p.snapshot_id, p.published_at, p.lag_since, p.lag_reason)


def _warehouse(value: str) -> str:
    text = validate.uri(value, "--iceberg-warehouse").rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep or not scheme.isalnum() or not rest.strip("/") or (scheme == "file" and not rest.startswith("/")):
        raise InvalidArgument(f"invalid --iceberg-warehouse {value!r}: expected an absolute folder URI such as "
                              f"'file:///lake/iceberg' or 's3://lake/iceberg'")
    return text


class Iceberg:
    """``catalog.iceberg``."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def set_enabled(self, ref: str | int, on: bool, *, warehouse: str | None = None,
                    db: str | None = None) -> IcebergPublicationView:
        """Turn a table's publication on (a warehouse is needed the first time) or off (its Iceberg
        table stays as it was, and its pins keep the files its snapshots name)."""
        if warehouse is not None:
            warehouse = _warehouse(warehouse)

        def run(s: Session) -> IcebergPublicationView:
            t = table_row(s, ref, db)
            view = table_view(s, t)
            p = s.get(m.IcebergPublication, t.id)
            if p is None:
                if not on:
                    raise InvalidArgument(f"table {view.qualified_name} is not published as an Iceberg table: "
                                          f"nothing to turn off ('--iceberg on' publishes it)")
                if not warehouse:
                    raise InvalidArgument(f"table {view.qualified_name}: '--iceberg on' needs a warehouse for the "
                                          f"Iceberg metadata: give --iceberg-warehouse URI (a folder, e.g. "
                                          f"file:///lake/iceberg) or set COLOCATE_ICEBERG_WAREHOUSE")
                p = m.IcebergPublication(table_id=t.id, enabled=True, warehouse=warehouse, namespace=view.db,
                                         created_at=self.db.now())
                s.add(p)
            else:
                p.enabled = on
                if warehouse and warehouse != p.warehouse:
                    if p.snapshot_id is not None:
                        raise InvalidArgument(f"table {view.qualified_name} is published under {p.warehouse} already; "
                                              f"its Iceberg table cannot move (leave --iceberg-warehouse out)")
                    p.warehouse = warehouse
            s.flush()
            self.db.event(s, "iceberg.enable" if on else "iceberg.disable", view.qualified_name, warehouse=p.warehouse)
            return _view(s, p)

        return self.db.tx(run)

    def set_group(self, ref: str, on: bool, *, warehouse: str | None = None, db: str | None = None) -> list[int]:
        """Turn publication on (or off) for every table of a group, and for the tables created in it
        later (on needs a warehouse; a table published already keeps its own). The ids of the
        tables it turned on, to publish now; all or nothing, in one transaction."""
        if warehouse is not None:
            warehouse = _warehouse(warehouse)

        def run(s: Session) -> list[int]:
            g = group_row(s, ref, db or DEFAULT_DB)
            label = group_view(s, g).full_name
            if on and not warehouse:
                raise InvalidArgument(f"group {label}: '--iceberg on' needs a warehouse for the Iceberg metadata: give "
                                      f"--iceberg-warehouse URI (a folder, e.g. file:///lake/iceberg) or set "
                                      f"COLOCATE_ICEBERG_WAREHOUSE")
            g.iceberg_warehouse = warehouse if on else None
            turned = []
            for t in s.scalars(select(m.Table).where(m.Table.group_id == g.id, m.Table.state == "normal")
                               .order_by(m.Table.id)):
                p = s.get(m.IcebergPublication, t.id)
                if p is None and on:
                    s.add(m.IcebergPublication(table_id=t.id, enabled=True, warehouse=warehouse,
                                               namespace=table_view(s, t).db, created_at=self.db.now()))
                elif p is not None:
                    p.enabled = on
                turned.append(t.id)
            self.db.event(s, "iceberg.group_enable" if on else "iceberg.group_disable", label, warehouse=warehouse,
                          tables=turned)
            return turned if on else []

        return self.db.tx(run)

    def get(self, ref: str | int, *, db: str | None = None) -> IcebergPublicationView:
        def run(s: Session) -> IcebergPublicationView:
            t = table_row(s, ref, db)
            p = s.get(m.IcebergPublication, t.id)
            if p is None:
                raise NotFound(f"table {table_view(s, t).qualified_name} is not published as an Iceberg table: "
                               f"'colocate table alter {table_view(s, t).qualified_name} --iceberg on' publishes it")
            return _view(s, p)

        return self.db.tx(run)

    def list(self, table_ids: Iterable[int] | None = None, *, enabled_only: bool = True) -> list[IcebergPublicationView]:
        """The publications (of ``table_ids`` only, when given) of tables not dropped. One small
        read: what every commit of ours asks before it publishes."""
        ids = None if table_ids is None else sorted(set(table_ids))

        def run(s: Session) -> list[IcebergPublicationView]:
            q = (select(m.IcebergPublication).join(m.Table, m.Table.id == m.IcebergPublication.table_id)
                 .where(m.Table.state == "normal").order_by(m.IcebergPublication.table_id))
            if enabled_only:
                q = q.where(m.IcebergPublication.enabled == True)  # noqa: E712
            if ids is not None:
                if not ids:
                    return []
                q = q.where(m.IcebergPublication.table_id.in_(ids))
            return [_view(s, p) for p in s.scalars(q)]

        return self.db.tx(run)

    def published(self, table_id: int, *, digest: str, snapshot_id: int | None,
                  partition_digests: dict[str, str] | None = None) -> None:
        """Record a publication that reached the Iceberg catalog: the lag, if any, is over."""
        def run(s: Session) -> None:
            p = s.get(m.IcebergPublication, table_id)
            if p is None:
                return
            p.digest, p.snapshot_id, p.published_at = digest, snapshot_id, self.db.now()
            p.partition_digests = partition_digests
            p.lag_since, p.lag_reason = None, None

        self.db.tx(run)

    def lagging(self, table_id: int, reason: str) -> None:
        """Record a publication that did not reach the Iceberg catalog, and why; the first such
        attempt's time stays (a lag is as old as the first commit it missed)."""
        def run(s: Session) -> None:
            p = s.get(m.IcebergPublication, table_id)
            if p is None:
                return
            if p.lag_since is None:
                p.lag_since = self.db.now()
            p.lag_reason = reason[:2000]

        self.db.tx(run)

    def partition_digests(self, table_id: int) -> dict[str, str] | None:
        return self.db.tx(lambda s: (lambda p: None if p is None or p.partition_digests is None
                                     else dict(p.partition_digests))(s.get(m.IcebergPublication, table_id)))

    def pin(self, table_id: int, dirs: Sequence[str]) -> None:
        """Keep these replica directories from gc: called BEFORE the Iceberg commit naming them,
        in the transaction that marks a publication in flight (its partition digests forgotten:
        a commit killed after Iceberg's and before its record cannot leave them stale)."""
        def run(s: Session) -> None:
            p = s.get(m.IcebergPublication, table_id)
            if p is not None:
                p.partition_digests = None
            have = set(s.scalars(select(m.IcebergPin.path).where(m.IcebergPin.table_id == table_id)))
            new = [{"path": d, "table_id": table_id} for d in sorted(set(dirs) - have)]
            if new:
                s.execute(m.IcebergPin.__table__.insert(), new)

        self.db.tx(run)

    def set_pins(self, table_id: int, dirs: Iterable[str]) -> int:
        """After an expiry: the pins become exactly the directories the retained snapshots name
        (and those a publication in flight pinned since, which ``keep`` callers pass in)."""
        want = set(dirs)

        def run(s: Session) -> int:
            have = set(s.scalars(select(m.IcebergPin.path).where(m.IcebergPin.table_id == table_id)))
            gone = sorted(have - want)
            for i in range(0, len(gone), 500):
                s.execute(delete(m.IcebergPin).where(m.IcebergPin.table_id == table_id,
                                                     m.IcebergPin.path.in_(gone[i:i + 500])))
            new = [{"path": d, "table_id": table_id} for d in sorted(want - have)]
            if new:
                s.execute(m.IcebergPin.__table__.insert(), new)
            return len(gone)

        return self.db.tx(run)

    def find(self, table_id: int) -> IcebergPublicationView | None:
        """The publication of a table in any state (a dropped one's too), None if it never had one:
        a row here means an Iceberg table may exist, so its table is not purged before it is gone."""
        def run(s: Session) -> IcebergPublicationView | None:
            p = s.get(m.IcebergPublication, table_id)
            return None if p is None else _view(s, p)

        return self.db.tx(run)

    def withdrawn(self, table_id: int, *, forget: bool) -> None:
        """After the table's Iceberg table was dropped: its pins go (no snapshot names a file now),
        and so does the publication when its table is purged (``forget``); a dropped table keeps it,
        emptied, for a recover to publish again. Never before the Iceberg drop: a crash between the
        two leaves pins that only keep files longer, and the next drop or purge finishes."""
        def run(s: Session) -> None:
            s.execute(delete(m.IcebergPin).where(m.IcebergPin.table_id == table_id))
            p = s.get(m.IcebergPublication, table_id)
            if p is None:
                return
            label = table_view(s, s.get(m.Table, table_id)).qualified_name
            if forget:
                s.delete(p)
            else:
                p.digest = p.snapshot_id = p.partition_digests = p.published_at = None
                p.lag_since = p.lag_reason = None
            self.db.event(s, "iceberg.withdraw", label, id=table_id, forget=forget)

        self.db.tx(run)

    def held(self, uris: Iterable[str]) -> set[str]:
        """Which of these folders gc must keep: a pinned directory, or one holding a pinned one
        (a version's folder holds its buckets'). One range lookup on the pins' key per folder."""
        uris = sorted(set(uris))

        def run(s: Session) -> set[str]:
            out = set()
            for u in uris:
                base = u.rstrip("/")
                # '/' is followed by '0' in byte order: [base/, base0) is everything under base/
                hit = s.scalar(select(m.IcebergPin.path).where(or_(
                    m.IcebergPin.path == base, and_(m.IcebergPin.path >= base + "/", m.IcebergPin.path < base + "0")))
                    .limit(1))
                if hit is not None:
                    out.add(u)
            return out

        return self.db.tx(run) if uris else set()


__all__ = ["Iceberg"]
