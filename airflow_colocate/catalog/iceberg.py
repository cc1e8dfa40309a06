"""``catalog.iceberg``: which tables are published as Iceberg tables, how far each publication has
followed our commits, and the replica directories retained Iceberg snapshots name (gc's pins).

The Iceberg commit itself is not made here (``jobs/iceberg.py`` makes it through pyiceberg after
ours); this repository only records what it did, in transactions of their own, so nothing here
ever holds up or rolls back one of our commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.rows import DEFAULT_DB, group_row, group_view, table_row, table_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.core.errors import InvalidArgument, NotFound
from airflow_colocate.core import validate
from airflow_colocate.model.views import IcebergPublicationView, PartitionReplicas, ReplicaView


PARTITION_KINDS = ("write.commit", "partition.drop", "partition.recover")  # subject: db.table/value
SCHEMA_KINDS = ("table.alter_schema", "table.alter")  # subject: db.table (table.alter: several changes at once)


@dataclass(frozen=True)
class MissedCommit:
    """One commit of ours that changed what a table's Iceberg table shows."""

    event_id: int
    kind: str  # write.commit | partition.drop | partition.recover | schema
    partition: str | None  # the partition value (None: a schema change)
    version: int  # the partition version it made visible (a drop: hid), or the new schema version
    previous: int | None  # a write's: the version it replaced (0 or None: none)
    batch: str | None = None  # shared by the events of one transaction of several (an import batch)


@dataclass(frozen=True)
class Missed:
    commits: list[MissedCommit]
    partitions: dict[str, tuple[int, int]]  # value -> (partition id, visible version now; 0: none)
    schema_version: int  # now


def _view(s: Session, p: m.IcebergPublication) -> IcebergPublicationView:
    t = s.get(m.Table, p.table_id)
    return IcebergPublicationView(p.table_id, table_view(s, t).qualified_name, p.enabled, p.warehouse, p.namespace,
                                  p.digest, p.snapshot_id, p.published_at, p.lag_since, p.lag_reason, p.event_id)


def _warehouse(value: str) -> str:
    text = validate.uri(value, "--iceberg-warehouse").rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep or not scheme.isalnum() or not rest.strip("/") or (scheme == "file" and not rest.startswith("/")):
        raise InvalidArgument(f"invalid --iceberg-warehouse {value!r}: expected an absolute folder URI such as "
                              f"'file:///lake/iceberg' or 's3://lake/iceberg'")
    return text


def _missed(s: Session, t: m.Table, after: int) -> list[MissedCommit]:
    """:meth:`Iceberg.missed`'s commits: the events after ``after`` of kinds that change what the
    Iceberg table shows, whose subject is the table (or one of its partitions), oldest first."""
    label = table_view(s, t).qualified_name
    like = label.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    q = (select(m.Event.id, m.Event.kind, m.Event.subject, m.Event.detail)
         .where(m.Event.id > after, m.Event.kind.in_((*PARTITION_KINDS, *SCHEMA_KINDS)),
                or_(m.Event.subject == label, m.Event.subject.like(like + "/%", escape="\\")))
         .order_by(m.Event.id))
    commits = []
    for eid, kind, subject, detail in s.execute(q):
        changes = detail.get("changes") if kind == "table.alter" else [dict(detail, kind=kind)]
        for c in changes or ():
            if c.get("kind") == "table.alter_schema" and c.get("id") == t.id:
                commits.append(MissedCommit(eid, "schema", None, int(c["schema_version"]), None))
            elif c.get("kind") in PARTITION_KINDS and subject.startswith(label + "/"):
                previous = c.get("previous")
                commits.append(MissedCommit(eid, c["kind"], subject[len(label) + 1:], int(c["version"]),
                                            None if previous is None else int(previous),
                                            None if c.get("batch") is None else str(c["batch"])))
    return commits


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
                if p.enabled != on:  # the commits made while off are not replayed when it is on again
                    p.event_id = None
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
                    if p.enabled != on:
                        p.event_id = None
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
                  partition_digests: dict[str, str] | None = None, event_id: int | None = None) -> None:
        """Record a publication that reached the Iceberg catalog: the lag, if any, is over.
        ``event_id``: the newest event it covers (what a later catch-up replays from)."""
        def run(s: Session) -> None:
            p = s.get(m.IcebergPublication, table_id)
            if p is None:
                return
            p.digest, p.snapshot_id, p.published_at = digest, snapshot_id, self.db.now()
            p.partition_digests = partition_digests
            p.lag_since, p.lag_reason = None, None
            if event_id is not None:
                p.event_id = event_id

        self.db.tx(run)

    def replayed(self, table_id: int, *, event_id: int, snapshot_id: int | None) -> None:
        """Record one snapshot of a catch-up (a missed commit of ours, replayed): the next attempt
        resumes after ``event_id``. The lag stays until the catch-up reaches the present."""
        def run(s: Session) -> None:
            p = s.get(m.IcebergPublication, table_id)
            if p is not None:
                p.event_id, p.snapshot_id, p.partition_digests = event_id, snapshot_id, None

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
                p.digest = p.snapshot_id = p.partition_digests = p.published_at = p.event_id = None
                p.lag_since = p.lag_reason = None
            self.db.event(s, "iceberg.withdraw", label, id=table_id, forget=forget)

        self.db.tx(run)

    def head(self) -> int:
        """The newest event id of the catalog (0: none): what a publication that read the table's
        state just before covers."""
        return self.db.tx(lambda s: s.scalar(select(func.max(m.Event.id))) or 0)

    def missed(self, table_id: int, covered: int = 0) -> Missed | None:
        """The table's commits after the event its Iceberg table covers (the later of the
        publication's record and ``covered``, its current snapshot's) that change what the Iceberg
        table shows (writes, overwrites, partition drops and recovers, schema changes), oldest
        first, with the table's partitions and schema version as they are now: in ONE
        transaction, so undoing those commits from the present, newest first, gives the state
        right after each. None when the publication covers no known event (published before 0013,
        or turned on again: the commits made while it was off are not replayed)."""
        def run(s: Session) -> Missed | None:
            p = s.get(m.IcebergPublication, table_id)
            if p is None or p.event_id is None:
                return None
            t = s.get(m.Table, table_id)
            parts = {part.value: (part.id, part.visible_version) for part in
                     s.scalars(select(m.Partition).where(m.Partition.table_id == table_id))}
            return Missed(_missed(s, t, max(p.event_id, covered)), parts, t.schema_version or 1)

        return self.db.tx(run)

    def version_replicas(self, table_id: int, versions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], PartitionReplicas | None]:
        """(partition value, version) -> that version's verified replicas per bucket, as reads get
        a visible version's; None when it is gone (gc removed it, or a bucket has no replica row
        left): a catch-up cannot name it."""
        keys = sorted(set(versions))

        def run(s: Session) -> dict[tuple[str, int], PartitionReplicas | None]:
            out: dict[tuple[str, int], PartitionReplicas | None] = {}
            for value, version in keys:
                p = s.scalar(select(m.Partition).where(m.Partition.table_id == table_id, m.Partition.value == value))
                pv = None if p is None else s.get(m.PartitionVersion, (p.id, version))
                if pv is None or pv.state not in ("committed", "superseded"):
                    out[(value, version)] = None
                    continue
                n = p.bucket_num  # a split version's finer buckets live in the folders of these
                buckets: list[list[ReplicaView]] = [[] for _ in range(n)]
                for r in s.scalars(select(m.Replica).where(m.Replica.partition_id == p.id, m.Replica.version == version,
                                                           m.Replica.state == "verified").order_by(m.Replica.id)):
                    if r.bucket_seq < n:
                        buckets[r.bucket_seq].append(ReplicaView(
                            r.bucket_seq, r.backend_id, r.path, r.rows, r.bytes, r.checksum, r.state, r.id,
                            None if r.files is None else tuple((f, int(b)) for f, b in r.files)))
                out[(value, version)] = (None if not all(buckets) else
                                         PartitionReplicas(value, version, tuple(tuple(b) for b in buckets),
                                                           pv.layout_buckets or 0))
            return out

        return self.db.tx(run)

    def awaited(self) -> set[tuple[int, int]]:
        """(partition id, version) of the versions a lagging publication's catch-up will name: those
        made visible by a commit after the event its last snapshot covers (a version superseded
        while the Iceberg table lagged was never named by a snapshot, so no pin keeps it). gc
        keeps them until the catch-up has published them (its pins keep them from then on, until
        their snapshots expire) or the publication is turned off."""
        def run(s: Session) -> set[tuple[int, int]]:
            out = set()
            for p in s.scalars(select(m.IcebergPublication).where(m.IcebergPublication.enabled == True,  # noqa: E712
                                                                  m.IcebergPublication.event_id.is_not(None))):
                t = s.get(m.Table, p.table_id)
                made = {(c.partition, c.version) for c in _missed(s, t, p.event_id)
                        if c.kind in ("write.commit", "partition.recover")}
                if made:
                    ids = dict(s.execute(select(m.Partition.value, m.Partition.id).where(
                        m.Partition.table_id == t.id, m.Partition.value.in_(sorted({v for v, _ in made})))).all())
                    out |= {(ids[v], ver) for v, ver in made if v in ids}
            return out

        return self.db.tx(run)

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


__all__ = ["Iceberg", "Missed", "MissedCommit"]
