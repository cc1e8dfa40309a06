"""The Catalog API: the only code in the package that reads or writes the catalog database.

Every public method that changes state runs in one transaction, writes one event row with it, and
is retried from the start if it lost a race with another writer (serialization failure on
PostgreSQL, a busy SQLite file, or a unique key taken a moment earlier). Methods return detached
views, never ORM objects.
"""

from __future__ import annotations

import getpass
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import TypeVar
from urllib.parse import urlparse

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from airflow_colocate import naming
from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.engine import default_url, make_engine
from airflow_colocate.catalog.migrate import current_revision, head_revision, migrate
from airflow_colocate.catalog.stability import StabilityMixin
from airflow_colocate.catalog.views import (
    BackendView,
    EventView,
    GarbageItem,
    GroupView,
    PartitionReplicas,
    PartitionView,
    ReplicaView,
    TableView,
    WriteTicket,
)
from airflow_colocate.errors import (
    AlreadyExists,
    ColocateError,
    Conflict,
    InvalidArgument,
    NotFound,
    PlacementError,
    SchemaMismatch,
)
from airflow_colocate.placement.initial import initial_map
from airflow_colocate.placement.model import BackendSlot
from airflow_colocate.plans import WriteReport
from airflow_colocate.storage import layout
from airflow_colocate.sqltypes import normalize_type

T = TypeVar("T")

DEFAULT_DB = "default"
FLAGS = ("disable_colocate_balance", "disable_colocate_relocate", "disable_colocate_join")
BACKEND_STATES = ("alive", "down", "decommissioning", "decommissioned")
ROOT_SCHEMES = ("file", "s3a", "s3", "hdfs", "gs", "abfs", "abfss", "wasbs")
DEFAULT_RETENTION = timedelta(days=1)
MAX_BUCKETS = 65536
_RETRIES = 30


def _utc(dt: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=timezone.utc)


def _retryable(exc: DBAPIError) -> bool:
    code = getattr(exc.orig, "pgcode", None)
    if code in ("40001", "40P01", "23505"):  # serialization failure, deadlock, unique race
        return True
    text = str(exc.orig).lower()
    return "database is locked" in text or "database table is locked" in text or "unique constraint failed" in text


def normalize_root(uri: object) -> str:
    """Validate a backend root URI and drop a trailing slash so that roots compare exactly."""
    if not isinstance(uri, str) or not uri:
        raise InvalidArgument(f"invalid backend root {uri!r}: expected a URI such as 'file:///data/be1' or 's3a://lake-be1/'")
    parsed = urlparse(uri)
    if parsed.scheme not in ROOT_SCHEMES:
        raise InvalidArgument(
            f"invalid backend root {uri!r}: the scheme must be one of {', '.join(s + '://' for s in ROOT_SCHEMES)} "
            f"(e.g. 'file:///data/be1')"
        )
    if parsed.scheme == "file" and (parsed.netloc or not parsed.path.startswith("/")):
        raise InvalidArgument(f"invalid backend root {uri!r}: a local root needs an absolute path, e.g. 'file:///data/be1'")
    if parsed.scheme != "file" and not parsed.netloc:
        raise InvalidArgument(f"invalid backend root {uri!r}: {parsed.scheme}:// needs a bucket or host, e.g. '{parsed.scheme}://lake-be1/'")
    if parsed.query or parsed.fragment or any(part in ("..", ".") for part in parsed.path.split("/")):
        raise InvalidArgument(f"invalid backend root {uri!r}: no '..', '.', query or fragment allowed in a root")
    return uri.rstrip("/") if parsed.path not in ("", "/") else uri.rstrip("/")


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


class Catalog(StabilityMixin):
    """Handle on one catalog database. Cheap to create; share one per process.

    Health, stability checks and balance jobs live in :class:`StabilityMixin`."""

    def __init__(self, url: str | None = None, *, actor: str | None = None,
                 clock: Callable[[], datetime] | None = None, engine: Engine | None = None):
        self.url = url or default_url()
        self.engine = engine or make_engine(self.url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.actor = actor or os.environ.get("COLOCATE_ACTOR") or _whoami()
        self._clock = clock or (lambda: datetime.now(timezone.utc))

    # ------------------------------------------------------------------ plumbing

    def now(self) -> datetime:
        return self._clock()

    def init(self) -> None:
        """Create or upgrade the schema and the ``default`` database; safe to run again."""
        migrate(self.engine)
        self._tx(lambda s: self._db_id(s, DEFAULT_DB, create=True))

    def check_schema(self) -> None:
        """Refuse to work on a database that was never initialised or is behind the code."""
        current = current_revision(self.engine)
        if current != head_revision():
            raise ColocateError(
                f"catalog at {self.engine.url.render_as_string(hide_password=True)} is at schema "
                f"{current or 'none'}, the code needs {head_revision()}: run 'colocate init' first"
            )

    def _tx(self, fn: Callable[[Session], T]) -> T:
        delay = 0.01
        for attempt in range(_RETRIES):
            try:
                with self._sessions.begin() as session:
                    return fn(session)
            except (OperationalError, IntegrityError, DBAPIError) as exc:
                if attempt == _RETRIES - 1 or not _retryable(exc):
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")

    def _event(self, s: Session, kind: str, subject: str, **detail) -> None:
        s.add(m.Event(ts=self.now(), kind=kind, subject=subject, detail=detail, actor=self.actor))

    # ------------------------------------------------------------------ databases

    def _db_id(self, s: Session, name: str, *, create: bool = False) -> int:
        naming.check_name("database", name)
        row = s.scalar(select(m.Database).where(m.Database.name == name))
        if row:
            return row.id
        if not create:
            raise NotFound(f"unknown database {name!r}: create a table in it first, or use '{DEFAULT_DB}'")
        row = m.Database(name=name, created_at=self.now())
        s.add(row)
        s.flush()
        self._event(s, "database.create", name)
        return row.id

    # ------------------------------------------------------------------ flags

    def set_flag(self, name: str, value: bool) -> None:
        if name not in FLAGS:
            raise InvalidArgument(f"unknown flag {name!r}: expected one of {', '.join(FLAGS)}")

        def run(s: Session) -> None:
            row = s.get(m.Flag, name)
            if row is None:
                s.add(m.Flag(name=name, value=bool(value), updated_at=self.now()))
            else:
                row.value, row.updated_at = bool(value), self.now()
            self._event(s, "flag.set", name, value=bool(value))

        self._tx(run)

    def flags(self) -> dict[str, bool]:
        def run(s: Session) -> dict[str, bool]:
            values = {f: False for f in FLAGS}
            values.update({r.name: r.value for r in s.scalars(select(m.Flag))})
            return values

        return self._tx(run)

    # ------------------------------------------------------------------ backends

    def add_backend(self, root_uri: str, *, name: str | None = None, host: str | None = None,
                    capacity_bytes: int | None = None) -> BackendView:
        """Register a storage backend. ``host`` defaults to the backend's own name, i.e. its own
        failure domain; give backends that share a machine the same host so that no bucket keeps
        two replicas there."""
        root = normalize_root(root_uri)
        if name is not None:
            naming.check_name("backend", name)
        if host is not None and (not isinstance(host, str) or not host or len(host) > 255 or any(c.isspace() or c == "/" for c in host)):
            raise InvalidArgument(f"invalid host {host!r}: expected a host name such as 'node-1.example.com'")
        if capacity_bytes is not None and (not isinstance(capacity_bytes, int) or capacity_bytes <= 0):
            raise InvalidArgument(f"invalid capacity {capacity_bytes!r}: expected a positive number of bytes, e.g. 1099511627776")

        def run(s: Session) -> BackendView:
            for other in s.scalars(select(m.Backend)):
                if _nested(other.root_uri, root):
                    what = "is already" if other.root_uri == root else "overlaps"
                    raise AlreadyExists(
                        f"backend root {root!r} {what} backend {other.name} (id {other.id}, root {other.root_uri!r}): "
                        f"each backend needs its own root that is not inside another's"
                    )
                if name is not None and other.name == name:
                    raise AlreadyExists(f"backend name {name!r} is taken by backend id {other.id}: choose another name")
            now = self.now()
            row = m.Backend(name=name or f"tmp_{random.getrandbits(48):x}", root_uri=root, host=host or "",
                            capacity_bytes=capacity_bytes, state="alive", state_since=now, created_at=now)
            s.add(row)
            s.flush()
            if name is None:
                row.name = f"be{row.id}"
            if not host:
                row.host = row.name
            self._event(s, "backend.add", row.name, id=row.id, root=root, host=row.host, capacity_bytes=capacity_bytes)
            return _backend_view(row)

        return self._tx(run)

    def _backend(self, s: Session, ref: int | str) -> m.Backend:
        row = None
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            row = s.get(m.Backend, int(ref))
        if row is None and isinstance(ref, str):
            row = s.scalar(select(m.Backend).where(m.Backend.name == ref))
        if row is None:
            known = ", ".join(f"{b.name} (id {b.id})" for b in s.scalars(select(m.Backend).order_by(m.Backend.id))) or "none"
            raise NotFound(f"unknown backend {ref!r}: known backends are {known}")
        return row

    def backends(self) -> list[BackendView]:
        return self._tx(lambda s: [_backend_view(b) for b in s.scalars(select(m.Backend).order_by(m.Backend.id))])

    def backend(self, ref: int | str) -> BackendView:
        return self._tx(lambda s: _backend_view(self._backend(s, ref)))

    def set_backend_state(self, ref: int | str, state: str, *, reason: str = "") -> BackendView:
        """Admin override (mark-down / mark-up). The health probe records through
        :meth:`record_probe`, which never overrides a state set here."""
        if state not in BACKEND_STATES:
            raise InvalidArgument(f"invalid backend state {state!r}: expected one of {', '.join(BACKEND_STATES)}")

        def run(s: Session) -> BackendView:
            row = self._backend(s, ref)
            if row.state in ("decommissioning", "decommissioned") and state in ("alive", "down"):
                raise Conflict(f"backend {row.name} is {row.state}: a decommissioned backend does not come back; add it again under a new root")
            if row.state != state:
                self._event(s, "backend.state", row.name, id=row.id, old=row.state, new=state, reason=reason)
                row.state, row.state_since = state, self.now()
            # An admin's mark holds: the health probe never brings up a backend marked down here.
            row.state_reason = None if state == "alive" else f"admin: {reason or 'marked ' + state}"[:1000]
            return _backend_view(row)

        return self._tx(run)

    def decommission_backend(self, ref: int | str) -> BackendView:
        """Start draining: the balancer moves every replica away, then marks it decommissioned."""
        def run(s: Session) -> BackendView:
            row = self._backend(s, ref)
            if row.state == "decommissioned":
                raise Conflict(f"backend {row.name} is already decommissioned: 'colocate backend remove {row.name}' deletes it")
            if row.state != "decommissioning":
                self._event(s, "backend.decommission", row.name, id=row.id, old=row.state)
                row.state, row.state_since = "decommissioning", self.now()
            return _backend_view(row)

        return self._tx(run)

    def remove_backend(self, ref: int | str) -> None:
        def run(s: Session) -> None:
            row = self._backend(s, ref)
            groups = sorted({g for g, ids in s.execute(select(m.BucketMap.group_id, m.BucketMap.backend_ids)) if row.id in ids})
            replicas = s.scalar(select(func.count()).select_from(m.Replica).where(m.Replica.backend_id == row.id))
            if groups or replicas:
                raise Conflict(
                    f"backend {row.name} still holds data ({replicas} replicas; in the bucket map of "
                    f"{len(groups)} groups): run 'colocate backend decommission {row.name}' and let the balancer drain it first"
                )
            self._event(s, "backend.remove", row.name, id=row.id, root=row.root_uri)
            s.delete(row)

        self._tx(run)

    # ------------------------------------------------------------------ groups

    def _group_view(self, s: Session, g: m.ColocateGroup, *, with_map: bool = False) -> GroupView:
        table_ids = tuple(s.scalars(select(m.Table.id).where(m.Table.group_id == g.id, m.Table.state == "normal").order_by(m.Table.id)))
        bucket_map: tuple[tuple[int, ...], ...] = ()
        if with_map:
            rows = s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id).order_by(m.BucketMap.bucket_seq))
            bucket_map = tuple(tuple(r.backend_ids) for r in rows)
        return GroupView(db_id=g.db_id or 0, grp_id=g.id, name=g.name, dist_col_types=tuple(g.dist_col_types),
                         bucket_num=g.bucket_num, replication_num=g.replication_num, stable=g.stable,
                         unstable_reason=g.unstable_reason, version=g.version, table_ids=table_ids, bucket_map=bucket_map)

    def _find_group(self, s: Session, name: str, db_id: int) -> m.ColocateGroup | None:
        if naming.is_global_group(name):
            return s.scalar(select(m.ColocateGroup).where(m.ColocateGroup.db_id.is_(None), m.ColocateGroup.name == name))
        return s.scalar(select(m.ColocateGroup).where(m.ColocateGroup.db_id == db_id, m.ColocateGroup.name == name))

    def _group(self, s: Session, ref: str, db: str = DEFAULT_DB) -> m.ColocateGroup:
        """Resolve ``dbId.grpId``, a full name ``dbId_name``, or a name in ``db``."""
        row = None
        if isinstance(ref, str) and ref.count(".") == 1 and all(p.isdigit() for p in ref.split(".")):
            db_id, grp_id = (int(p) for p in ref.split("."))
            row = s.get(m.ColocateGroup, grp_id)
            if row is not None and (row.db_id or 0) != db_id:
                row = None
        elif isinstance(ref, str):
            head, _, rest = ref.partition("_")
            if head.isdigit() and rest:
                row = self._find_group(s, rest, int(head))
            if row is None and naming._NAME.fullmatch(ref):
                db_row = s.scalar(select(m.Database).where(m.Database.name == db))
                row = self._find_group(s, ref, db_row.id if db_row else -1)
        if row is None:
            known = ", ".join(f"{self._group_view(s, g).full_name} ({self._group_view(s, g).group_id})"
                              for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id))) or "none"
            raise NotFound(f"unknown colocation group {ref!r}: known groups are {known}")
        return row

    def groups(self) -> list[GroupView]:
        return self._tx(lambda s: [self._group_view(s, g, with_map=True)
                                   for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id))])

    def group(self, ref: str, *, db: str = DEFAULT_DB) -> GroupView:
        return self._tx(lambda s: self._group_view(s, self._group(s, ref, db), with_map=True))

    def _slot_load(self, s: Session, exclude_group: int | None = None) -> Counter:
        load: Counter = Counter()
        for gid, ids in s.execute(select(m.BucketMap.group_id, m.BucketMap.backend_ids)):
            if gid != exclude_group:
                load.update(ids)
        return load

    def _create_group(self, s: Session, name: str, db_id: int, dist_types: list[str], bucket_num: int,
                      replication_num: int) -> m.ColocateGroup:
        backends = list(s.scalars(select(m.Backend).order_by(m.Backend.id)))
        slots = [BackendSlot(id=b.id, host=b.host, capacity_bytes=b.capacity_bytes, available=b.state == "alive")
                 for b in backends]
        bucket_map = initial_map(slots, bucket_num, replication_num, load=self._slot_load(s))
        g = m.ColocateGroup(db_id=None if naming.is_global_group(name) else db_id, name=name,
                            dist_col_types=dist_types, bucket_num=bucket_num, replication_num=replication_num,
                            stable=True, unstable_reason=None, version=1, created_at=self.now())
        s.add(g)
        s.flush()
        for seq, ids in enumerate(bucket_map):
            s.add(m.BucketMap(group_id=g.id, bucket_seq=seq, backend_ids=list(ids)))
        view = self._group_view(s, g)
        self._event(s, "group.create", view.full_name, group_id=view.group_id, dist_col_types=dist_types,
                    bucket_num=bucket_num, replication_num=replication_num, bucket_map=bucket_map)
        return g

    def set_group_stable(self, ref: str, stable: bool, *, reason: str | None = None, db: str = DEFAULT_DB) -> GroupView:
        """Operator override; the next stability check replaces it if the replicas disagree."""
        def run(s: Session) -> GroupView:
            g = self._group(s, ref, db)
            g.stable = bool(stable)
            g.unstable_reason = None if stable else (reason or "marked unstable by an operator")
            g.version += 1
            self._event(s, "group.mark_stable" if stable else "group.mark_unstable", self._group_view(s, g).full_name,
                        reason=g.unstable_reason)
            return self._group_view(s, g, with_map=True)

        return self._tx(run)

    def _maybe_remove_group(self, s: Session, group_id: int | None) -> None:
        """A group lives as long as any table (live or recoverable) names it."""
        if group_id is None:
            return
        left = s.scalar(select(func.count()).select_from(m.Table).where(m.Table.group_id == group_id))
        if left == 0:
            g = s.get(m.ColocateGroup, group_id)
            name = self._group_view(s, g).full_name
            s.execute(delete(m.BucketMap).where(m.BucketMap.group_id == group_id))
            s.delete(g)
            self._event(s, "group.remove", name, grp_id=group_id)

    # ------------------------------------------------------------------ tables

    def create_table(self, name: str, columns: Sequence[tuple[str, str]], dist_cols: Sequence[str], *,
                     bucket_num: int, replication_num: int = 1, partition_cols: Sequence[str] = (),
                     colocate_with: str | None = None, db: str | None = None,
                     if_not_exists: bool = False) -> TableView:
        """Create a table; with ``colocate_with`` join that group or found it as its parent table."""
        db_name, table_name = naming.split_qualified(name, db or DEFAULT_DB)
        cols = _check_columns(columns)
        col_types = dict(cols)
        dist = _check_col_list("distribution", dist_cols, col_types, required=True)
        parts = _check_col_list("partition", partition_cols, col_types, required=False)
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
        _check_counts(bucket_num, replication_num)
        if colocate_with == "":
            colocate_with = None
        if colocate_with is not None:
            naming.check_group_name(colocate_with)
        dist_types = [col_types[c] for c in dist]

        def run(s: Session) -> TableView:
            db_id = self._db_id(s, db_name, create=True)
            existing = s.scalar(select(m.Table).where(m.Table.db_id == db_id, m.Table.name == table_name, m.Table.state == "normal"))
            if existing is not None:
                if if_not_exists:
                    return self._table_view(s, existing)
                raise AlreadyExists(f"table {db_name}.{table_name} already exists (id {existing.id}): drop it first or use if_not_exists")
            _check_replication_vs_backends(s, replication_num)
            group = None
            if colocate_with is not None:
                group = self._find_group(s, colocate_with, db_id)
                if group is None:
                    group = self._create_group(s, colocate_with, db_id, dist_types, bucket_num, replication_num)
                else:
                    _check_cgs(group, f"table {db_name}.{table_name}", dist_types, bucket_num, replication_num)
            t = m.Table(db_id=db_id, name=table_name, columns=[list(c) for c in cols], dist_cols=dist,
                        partition_cols=parts, bucket_num=bucket_num, replication_num=replication_num,
                        group_id=group.id if group else None, state="normal", created_at=self.now())
            s.add(t)
            s.flush()
            if group is not None:
                group.version += 1
            self._event(s, "table.create", f"{db_name}.{table_name}", id=t.id, group=colocate_with,
                        bucket_num=bucket_num, replication_num=replication_num, dist_cols=dist, partition_cols=parts)
            return self._table_view(s, t)

        return self._tx(run)

    def _table(self, s: Session, ref: str | int, db: str | None = None, *, state: str = "normal") -> m.Table:
        if isinstance(ref, int):
            t = s.get(m.Table, ref)
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

    def _table_view(self, s: Session, t: m.Table) -> TableView:
        db = s.get(m.Database, t.db_id)
        gv = self._group_view(s, s.get(m.ColocateGroup, t.group_id)) if t.group_id else None
        return TableView(id=t.id, db=db.name, name=t.name, columns=tuple(tuple(c) for c in t.columns),
                         dist_cols=tuple(t.dist_cols), partition_cols=tuple(t.partition_cols),
                         bucket_num=t.bucket_num, replication_num=t.replication_num,
                         group_id=gv.group_id if gv else None, group_name=gv.name if gv else None,
                         state=t.state, dropped_at=_utc(t.dropped_at))

    def table(self, ref: str | int, *, db: str | None = None) -> TableView:
        return self._tx(lambda s: self._table_view(s, self._table(s, ref, db)))

    def tables(self, *, include_dropped: bool = False) -> list[TableView]:
        def run(s: Session) -> list[TableView]:
            q = select(m.Table).order_by(m.Table.id)
            if not include_dropped:
                q = q.where(m.Table.state == "normal")
            return [self._table_view(s, t) for t in s.scalars(q)]

        return self._tx(run)

    def alter_colocate_with(self, ref: str, colocate_with: str, *, db: str | None = None) -> TableView:
        """Move a table to another group (created if missing), or out of its group with ``""``."""
        if colocate_with != "":
            naming.check_group_name(colocate_with)

        def run(s: Session) -> TableView:
            t = self._table(s, ref, db)
            old_group = t.group_id
            label = f"{self._table_view(s, t).qualified_name}"
            if colocate_with == "":
                if old_group is None:
                    return self._table_view(s, t)
                t.group_id = None
            else:
                target = self._find_group(s, colocate_with, t.db_id)
                dist_types = [dict(map(tuple, t.columns))[c] for c in t.dist_cols]
                if target is None:
                    _check_replication_vs_backends(s, t.replication_num)
                    target = self._create_group(s, colocate_with, t.db_id, dist_types, t.bucket_num, t.replication_num)
                else:
                    if target.id == old_group:
                        return self._table_view(s, t)
                    _check_cgs(target, f"table {label}", dist_types, t.bucket_num, t.replication_num)
                    for p in s.scalars(select(m.Partition).where(m.Partition.table_id == t.id)):
                        _check_cgs(target, f"partition {p.value} of table {label}", dist_types, p.bucket_num, p.replication_num)
                t.group_id = target.id
                target.version += 1
                has_data = s.scalar(select(func.count()).select_from(m.Partition).where(
                    m.Partition.table_id == t.id, m.Partition.visible_version > 0))
                if has_data:
                    # Its replicas sit where its old placement put them; a balance moves them.
                    target.stable = False
                    target.unstable_reason = f"table {label} joined the group; its replicas must be moved onto the group's bucket map by a balance"
            if old_group is not None:
                g = s.get(m.ColocateGroup, old_group)
                g.version += 1
            self._event(s, "table.alter_colocate_with", label, old_group=old_group, new_group=colocate_with or None)
            s.flush()
            self._maybe_remove_group(s, old_group)
            return self._table_view(s, t)

        return self._tx(run)

    def set_replication_num(self, ref: str, replication_num: int, *, db: str | None = None) -> TableView:
        _check_counts(1, replication_num)

        def run(s: Session) -> TableView:
            t = self._table(s, ref, db)
            label = self._table_view(s, t).qualified_name
            if t.group_id is not None:
                g = s.get(m.ColocateGroup, t.group_id)
                if replication_num != g.replication_num:
                    raise SchemaMismatch(
                        f"cannot set replication_num of {label} to {replication_num}: it is in colocation group "
                        f"{self._group_view(s, g).full_name}, whose schema fixes replication_num = {g.replication_num}; "
                        f"take the table out of the group first (colocate_with = \"\")"
                    )
                return self._table_view(s, t)
            _check_replication_vs_backends(s, replication_num)
            self._event(s, "table.set_replication_num", label, old=t.replication_num, new=replication_num)
            t.replication_num = replication_num
            return self._table_view(s, t)

        return self._tx(run)

    def drop_table(self, ref: str, *, db: str | None = None, force: bool = False) -> TableView:
        """Drop a table; it stays recoverable for the retention unless ``force`` purges it now."""
        def run(s: Session) -> TableView:
            t = self._table(s, ref, db)
            t.state, t.dropped_at = "dropped", self.now()
            if t.group_id is not None:
                s.get(m.ColocateGroup, t.group_id).version += 1
            view = self._table_view(s, t)
            self._event(s, "table.drop", view.qualified_name, id=t.id, force=force)
            if force:
                self._purge(s, t)
            return view

        return self._tx(run)

    def recover_table(self, ref: str, *, db: str | None = None) -> TableView:
        def run(s: Session) -> TableView:
            t = self._table(s, ref, db, state="dropped")
            label = self._table_view(s, t).qualified_name
            clash = s.scalar(select(m.Table).where(m.Table.db_id == t.db_id, m.Table.name == t.name, m.Table.state == "normal"))
            if clash is not None:
                raise AlreadyExists(f"cannot recover {label}: a new table of that name exists (id {clash.id}); drop or rename it first")
            t.state, t.dropped_at = "normal", None
            if t.group_id is not None:
                s.get(m.ColocateGroup, t.group_id).version += 1
            self._event(s, "table.recover", label, id=t.id)
            return self._table_view(s, t)

        return self._tx(run)

    def purge_dropped(self, *, retention: timedelta = DEFAULT_RETENTION) -> list[TableView]:
        """Erase tables dropped longer than ``retention`` ago (and any group they leave empty)."""
        def run(s: Session) -> list[TableView]:
            cutoff = self.now() - retention
            purged = []
            for t in list(s.scalars(select(m.Table).where(m.Table.state == "dropped").order_by(m.Table.id))):
                if _utc(t.dropped_at) <= cutoff:
                    purged.append(self._table_view(s, t))
                    self._purge(s, t)
            return purged

        return self._tx(run)

    def _purge(self, s: Session, t: m.Table) -> None:
        group_id = t.group_id
        label = self._table_view(s, t).qualified_name
        paths = list(s.scalars(select(m.Replica.path).where(m.Replica.table_id == t.id)))
        part_ids = list(s.scalars(select(m.Partition.id).where(m.Partition.table_id == t.id)))
        s.execute(delete(m.Replica).where(m.Replica.table_id == t.id))
        if part_ids:
            s.execute(delete(m.PartitionVersion).where(m.PartitionVersion.partition_id.in_(part_ids)))
        s.execute(delete(m.Partition).where(m.Partition.table_id == t.id))
        s.delete(t)
        s.flush()
        # The files go after the rows: a pending gc job tells 'colocate gc' which paths are garbage.
        if paths:
            s.add(m.Job(kind="gc", group_id=None, state="pending", plan={"paths": sorted(set(paths)), "table": label},
                        progress={}, created_at=self.now(), updated_at=self.now()))
        self._event(s, "table.purge", label, id=t.id, replicas=len(paths))
        self._maybe_remove_group(s, group_id)

    # ------------------------------------------------------------------ partitions

    def add_partition(self, ref: str, value: str, *, bucket_num: int | None = None,
                      replication_num: int | None = None, db: str | None = None,
                      if_not_exists: bool = False) -> PartitionView:
        """Add a partition, checked against the group schema: bucket count and replication number."""
        naming.check_partition_value(value)

        def run(s: Session) -> PartitionView:
            t = self._table(s, ref, db)
            label = self._table_view(s, t).qualified_name
            if not t.partition_cols:
                if value != "all":
                    raise InvalidArgument(f"table {label} is not partitioned: its single partition is called 'all', not {value!r}")
            existing = s.scalar(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.value == value))
            if existing is not None:
                if if_not_exists:
                    return _partition_view(existing)
                raise AlreadyExists(f"partition {value!r} of {label} already exists")
            buckets = t.bucket_num if bucket_num is None else bucket_num
            replicas = t.replication_num if replication_num is None else replication_num
            _check_counts(buckets, replicas)
            if t.group_id is not None:
                g = s.get(m.ColocateGroup, t.group_id)
                dist_types = [dict(map(tuple, t.columns))[c] for c in t.dist_cols]
                _check_cgs(g, f"partition {value} of table {label}", dist_types, buckets, replicas)
            else:
                _check_replication_vs_backends(s, replicas)
            p = m.Partition(table_id=t.id, value=value, bucket_num=buckets, replication_num=replicas,
                            visible_version=0, next_version=1, created_at=self.now())
            s.add(p)
            s.flush()
            self._event(s, "partition.add", f"{label}/{value}", bucket_num=buckets, replication_num=replicas)
            return _partition_view(p)

        return self._tx(run)

    def partitions(self, ref: str, *, db: str | None = None) -> list[PartitionView]:
        def run(s: Session) -> list[PartitionView]:
            t = self._table(s, ref, db)
            return [_partition_view(p) for p in s.scalars(select(m.Partition).where(m.Partition.table_id == t.id).order_by(m.Partition.value))]

        return self._tx(run)

    # ------------------------------------------------------------------ versioned writes

    def begin_write(self, ref: str, partition_value: str, *, mode: str = "overwrite", db: str | None = None,
                    plan: dict | None = None) -> WriteTicket:
        """Allocate a new partition version in state ``staging`` and say where each bucket goes.

        Nothing becomes visible until :meth:`commit_write`; a write that dies leaves the version in
        staging, and ``colocate gc`` removes its files after the stale period.
        """
        if mode not in ("overwrite", "append"):
            raise InvalidArgument(f"invalid write mode {mode!r}: expected 'overwrite' (replace the partition) or 'append'")
        naming.check_partition_value(partition_value)

        def run(s: Session) -> WriteTicket:
            t = self._table(s, ref, db)
            view = self._table_view(s, t)
            p = s.scalar(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.value == partition_value))
            if p is None:
                if not t.partition_cols and partition_value != "all":
                    raise InvalidArgument(f"table {view.qualified_name} is not partitioned: write partition 'all', not {partition_value!r}")
                buckets, replicas = t.bucket_num, t.replication_num
                if t.group_id is not None:
                    g = s.get(m.ColocateGroup, t.group_id)
                    buckets, replicas = g.bucket_num, g.replication_num
                p = m.Partition(table_id=t.id, value=partition_value, bucket_num=buckets, replication_num=replicas,
                                visible_version=0, next_version=1, created_at=self.now())
                s.add(p)
                s.flush()
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            alive = [b for b in backends.values() if b.state == "alive"]
            if len({b.host for b in alive}) < p.replication_num:
                _check_replication_vs_backends(s, p.replication_num)
            base_version = p.visible_version if mode == "append" else 0
            bucket_map = self._write_map(s, t, p, backends, base_version)
            quorum = p.replication_num // 2 + 1
            targets, missing = [], []
            for seq, ids in enumerate(bucket_map):
                ok = [(i, backends[i].root_uri) for i in ids if i in backends and backends[i].state == "alive"]
                missing += [f"bucket {seq} on backend {backends[i].name if i in backends else i}" for i in ids
                            if i not in backends or backends[i].state != "alive"]
                if len(ok) < quorum:
                    down = ", ".join(backends[i].name if i in backends else str(i) for i in ids
                                     if i not in backends or backends[i].state != "alive")
                    raise PlacementError(
                        f"cannot write {view.qualified_name}/{partition_value}: bucket {seq} is mapped to backends "
                        f"{', '.join(map(str, ids))}, of which {down} are not alive, leaving {len(ok)} of the {quorum} "
                        f"replicas a write needs: bring the backends back ('colocate backend mark-up') or repair the group"
                    )
                targets.append(tuple(ok))
            base_paths = self._base_paths(s, p, base_version, targets)
            version = p.next_version
            p.next_version += 1
            s.add(m.PartitionVersion(partition_id=p.id, version=version, state="staging", mode=mode,
                                     base_version=base_version, created_at=self.now()))
            job = m.Job(kind="write", group_id=t.group_id, state="running", plan=plan or {}, progress={},
                        created_at=self.now(), updated_at=self.now())
            s.add(job)
            s.flush()
            job.plan = dict(job.plan, table_id=t.id, partition_id=p.id, version=version,
                            dirs=sorted({layout.version_dir(root, view.db, t.name, t.id, partition_value, version)
                                         for bucket in targets for _, root in bucket}))
            self._event(s, "write.begin", f"{view.qualified_name}/{partition_value}", job_id=job.id, version=version,
                        mode=mode, base_version=base_version, missing=missing)
            return WriteTicket(job_id=job.id, table=view, partition_id=p.id, partition_value=partition_value,
                               version=version, base_version=base_version, mode=mode, targets=tuple(targets),
                               base_paths=base_paths, missing=tuple(missing))

        return self._tx(run)

    def _write_map(self, s: Session, t: m.Table, p: m.Partition, backends: dict, base_version: int) -> list[list[int]]:
        """The group's map; for a table outside any group, where its partition already lives, else
        a fresh round-robin placement."""
        if t.group_id is not None:
            rows = s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == t.group_id).order_by(m.BucketMap.bucket_seq))
            return [list(r.backend_ids) for r in rows]
        if p.visible_version:
            placed: dict[int, list[int]] = {}
            for r in s.scalars(select(m.Replica).where(m.Replica.partition_id == p.id, m.Replica.version == p.visible_version,
                                                       m.Replica.state == "verified").order_by(m.Replica.id)):
                placed.setdefault(r.bucket_seq, []).append(r.backend_id)
            if len(placed) == p.bucket_num:
                return [placed[b] for b in range(p.bucket_num)]
        slots = [BackendSlot(id=b.id, host=b.host, capacity_bytes=b.capacity_bytes, available=b.state == "alive")
                 for b in sorted(backends.values(), key=lambda b: b.id)]
        return initial_map(slots, p.bucket_num, p.replication_num, load=self._slot_load(s))

    def _base_paths(self, s: Session, p: m.Partition, base_version: int, targets: list) -> tuple[tuple[str, ...], ...]:
        if not base_version:
            return tuple(tuple("" for _ in bucket) for bucket in targets)
        verified: dict[int, dict[int, str]] = {}
        for r in s.scalars(select(m.Replica).where(m.Replica.partition_id == p.id, m.Replica.version == base_version,
                                                   m.Replica.state == "verified")):
            verified.setdefault(r.bucket_seq, {})[r.backend_id] = r.path
        out = []
        for seq, bucket in enumerate(targets):
            have = verified.get(seq, {})
            if not have:
                raise Conflict(f"cannot append to partition {p.value}: bucket {seq} of version {base_version} has no "
                               f"verified replica; repair the group first or overwrite the partition")
            any_path = next(iter(have.values()))
            out.append(tuple(have.get(backend_id, any_path) for backend_id, _ in bucket))
        return tuple(out)

    def commit_write(self, job_id: int, report: WriteReport) -> PartitionView:
        """Check the job's report against what :meth:`begin_write` granted, then make the version
        visible, in one transaction. Any mismatch aborts the version and commits nothing."""
        problems: list[str] = []

        def run(s: Session) -> PartitionView:
            job, p, pv, t = self._write_job(s, job_id)
            label = f"{self._table_view(s, t).qualified_name}/{p.value}"
            if report.version != pv.version or report.partition_value != p.value:
                problems.append(f"the report is for {report.partition_value} v{report.version}, the job wrote {p.value} v{pv.version}")
            granted = job.plan.get("targets", {})
            by_bucket: dict[int, list] = {}
            for r in report.replicas:
                by_bucket.setdefault(r.bucket_seq, []).append(r)
            for seq in range(p.bucket_num):
                want = sorted(granted.get(str(seq), []))
                got = by_bucket.get(seq, [])
                if sorted(r.backend_id for r in got) != want:
                    problems.append(f"bucket {seq} has replicas on backends {sorted(r.backend_id for r in got)}, expected {want}")
                    continue
                if len({r.checksum for r in got}) > 1 or len({r.rows for r in got}) > 1:
                    problems.append(f"bucket {seq} replicas differ: " + ", ".join(f"backend {r.backend_id}: {r.rows} rows, {r.checksum[:12]}" for r in got))
            if pv.mode == "append" and p.visible_version != pv.base_version:
                problems.append(f"partition moved from v{pv.base_version} to v{p.visible_version} while this append ran; re-run it")
            if problems:
                return None  # the caller aborts in its own transaction and raises
            now = self.now()
            for r in report.replicas:
                s.add(m.Replica(table_id=t.id, partition_id=p.id, version=pv.version, bucket_seq=r.bucket_seq,
                                backend_id=r.backend_id, state="verified", path=r.path, rows=r.rows, bytes=r.bytes,
                                checksum=r.checksum, created_at=now))
            rows = sum(got[0].rows for got in by_bucket.values())
            old = p.visible_version
            if old:
                prev = s.get(m.PartitionVersion, (p.id, old))
                prev.state, prev.finished_at = "superseded", now
            pv.state, pv.rows, pv.bytes, pv.finished_at = "committed", rows, sum(r.bytes for r in report.replicas), now
            p.visible_version = pv.version
            job.state, job.updated_at = "committed", now
            job.progress = {"rows": rows, "replicas": len(report.replicas)}
            if t.group_id is not None and job.plan.get("missing"):
                g = s.get(m.ColocateGroup, t.group_id)
                g.stable = False
                g.unstable_reason = f"{label} v{pv.version} is missing replicas: " + "; ".join(job.plan["missing"][:5])
                g.version += 1
            self._event(s, "write.commit", label, job_id=job_id, version=pv.version, previous=old, rows=rows,
                        mode=pv.mode)
            return _partition_view(p)

        result = self._tx(run)
        if result is None:
            reason = "; ".join(problems)
            self.abort_write(job_id, reason)
            raise ColocateError(f"write job {job_id} not committed, the previous version stays visible: {reason}")
        return result

    def abort_write(self, job_id: int, reason: str) -> None:
        def run(s: Session) -> None:
            job, p, pv, t = self._write_job(s, job_id, allow_finished=True)
            if pv.state != "staging":
                return
            pv.state, pv.finished_at = "aborted", self.now()
            job.state, job.updated_at, job.progress = "failed", self.now(), {"error": reason[:2000]}
            self._event(s, "write.abort", f"{self._table_view(s, t).qualified_name}/{p.value}", job_id=job_id,
                        version=pv.version, reason=reason[:2000])

        self._tx(run)

    def set_write_targets(self, job_id: int, targets: dict[int, list[int]], missing: Sequence[str], plan: dict) -> None:
        """Record the exact plan handed to Spark so that commit checks the report against it."""
        def run(s: Session) -> None:
            job = s.get(m.Job, job_id)
            job.plan = dict(job.plan, **plan, targets={str(k): list(v) for k, v in targets.items()}, missing=list(missing))
            job.updated_at = self.now()

        self._tx(run)

    def _write_job(self, s: Session, job_id: int, *, allow_finished: bool = False):
        job = s.get(m.Job, job_id)
        if job is None or job.kind != "write":
            raise NotFound(f"unknown write job {job_id}")
        if job.state != "running" and not allow_finished:
            raise Conflict(f"write job {job_id} is {job.state}, not running: nothing to commit")
        p = s.get(m.Partition, job.plan["partition_id"])
        if p is None:
            raise Conflict(f"write job {job_id}: its table or partition was purged while it ran")
        pv = s.get(m.PartitionVersion, (p.id, job.plan["version"]))
        return job, p, pv, s.get(m.Table, p.table_id)

    def job(self, job_id: int) -> dict:
        def run(s: Session) -> dict:
            j = s.get(m.Job, job_id)
            if j is None:
                raise NotFound(f"unknown job {job_id}")
            return {"id": j.id, "kind": j.kind, "state": j.state, "plan": j.plan, "progress": j.progress,
                    "created_at": _utc(j.created_at), "updated_at": _utc(j.updated_at)}

        return self._tx(run)

    # ------------------------------------------------------------------ reads

    def read_replicas(self, ref: str | int, partitions: Sequence[str] | None = None, *,
                      db: str | None = None) -> tuple[TableView, list[PartitionReplicas]]:
        """The visible version of each requested partition (all committed ones by default) with its
        verified replicas per bucket; the caller chooses one replica per bucket."""
        def run(s: Session):
            t = self._table(s, ref, db)
            view = self._table_view(s, t)
            q = select(m.Partition).where(m.Partition.table_id == t.id).order_by(m.Partition.value)
            parts = {p.value: p for p in s.scalars(q)}
            wanted = list(partitions) if partitions is not None else [v for v, p in parts.items() if p.visible_version]
            out = []
            for value in wanted:
                p = parts.get(value)
                if p is None or not p.visible_version:
                    have = ", ".join(v for v, x in parts.items() if x.visible_version) or "none"
                    raise NotFound(f"partition {value!r} of {view.qualified_name} has no committed data; committed partitions: {have}")
                buckets: list[list[ReplicaView]] = [[] for _ in range(p.bucket_num)]
                for r in s.scalars(select(m.Replica).where(m.Replica.partition_id == p.id, m.Replica.version == p.visible_version,
                                                           m.Replica.state == "verified").order_by(m.Replica.id)):
                    buckets[r.bucket_seq].append(ReplicaView(r.bucket_seq, r.backend_id, r.path, r.rows, r.bytes, r.checksum, r.state))
                out.append(PartitionReplicas(value=value, version=p.visible_version, buckets=tuple(tuple(b) for b in buckets)))
            return view, out

        return self._tx(run)

    # ------------------------------------------------------------------ garbage

    def garbage(self, *, grace: timedelta = timedelta(hours=1), stale_after: timedelta = timedelta(hours=24)) -> list[GarbageItem]:
        """Files no reader needs: aborted and superseded versions older than ``grace``, and writes
        still in staging after ``stale_after`` (their job died). Also marks those stale writes
        aborted, so that a late report can no longer commit them."""
        def run(s: Session) -> list[GarbageItem]:
            now = self.now()
            items: list[GarbageItem] = []
            for job in s.scalars(select(m.Job).where(m.Job.kind == "write").order_by(m.Job.id)):
                pid, version = job.plan.get("partition_id"), job.plan.get("version")
                pv = s.get(m.PartitionVersion, (pid, version)) if pid is not None else None
                if pv is None:
                    continue
                if pv.state == "staging" and _utc(job.created_at) <= now - stale_after:
                    pv.state, pv.finished_at = "aborted", now
                    job.state, job.updated_at = "failed", now
                    self._event(s, "write.abort", f"job {job.id}", job_id=job.id, version=version, reason="stale")
                finished = _utc(pv.finished_at)
                if pv.state in ("aborted", "superseded") and finished is not None and finished <= now - grace:
                    dirs = set(job.plan.get("dirs", []))
                    dirs.update(s.scalars(select(m.Replica.path).where(m.Replica.partition_id == pid, m.Replica.version == version)))
                    for d in sorted(dirs):
                        items.append(GarbageItem(f"{pv.state} version", d, pid, version, job.id))
                    if "staging_uri" in job.plan:
                        items.append(GarbageItem("write staging", job.plan["staging_uri"], pid, version, job.id))
                if job.state in ("committed", "failed") and "staging_uri" in job.plan and pv.state != "staging":
                    if _utc(job.updated_at) <= now - grace:
                        items.append(GarbageItem("write staging", job.plan["staging_uri"], None, None, job.id))
            for job in s.scalars(select(m.Job).where(m.Job.kind == "gc", m.Job.state == "pending")):
                items += [GarbageItem(f"purged table {job.plan.get('table')}", path, job_id=job.id) for path in job.plan["paths"]]
            return items

        return self._tx(run)

    def forget_garbage(self, items: Iterable[GarbageItem]) -> None:
        """After the files are gone: drop the rows of the removed versions."""
        items = list(items)

        def run(s: Session) -> None:
            done = {(i.partition_id, i.version) for i in items if i.partition_id is not None}
            for pid, version in done:
                s.execute(delete(m.Replica).where(m.Replica.partition_id == pid, m.Replica.version == version))
                pv = s.get(m.PartitionVersion, (pid, version))
                if pv is not None and pv.state in ("aborted", "superseded"):
                    pv.state = "removed"
            for job_id in {i.job_id for i in items if i.job_id is not None}:
                job = s.get(m.Job, job_id)
                if job is None:
                    continue
                if job.kind == "gc":
                    job.state, job.updated_at = "done", self.now()
                elif "staging_uri" in job.plan:
                    job.plan = {k: v for k, v in job.plan.items() if k != "staging_uri"}
            self._event(s, "gc", "catalog", versions=len(done), items=len(items))

        self._tx(run)

    # ------------------------------------------------------------------ admin API (plugins/)

    def set_bucket_map(self, ref: str, bucket_map: Sequence[Sequence[int]], *, force: bool = False,
                       db: str = DEFAULT_DB) -> GroupView:
        """Force a group's bucket sequence (the seeds' ``POST /api/colocate/bucketseq``).

        The map must have one entry per bucket and one backend per replica; every backend must
        exist and be alive, and a bucket may not name one backend, or one host, twice. Refused
        while repair or balance could move the map back (``disable_colocate_balance`` and
        ``disable_colocate_relocate`` not both set) or a balance job is changing the group, unless
        ``force``. Replicas are not moved here: if committed data is not where the new map says,
        the group becomes unstable until a repair clones it there.
        """
        if not isinstance(bucket_map, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in bucket_map):
            raise InvalidArgument(f"invalid bucket map {bucket_map!r}: expected a list with one list of backend ids per bucket, e.g. [[1, 2], [2, 3]]")
        rows = [list(r) for r in bucket_map]
        for seq, row in enumerate(rows):
            for be in row:
                if isinstance(be, bool) or not isinstance(be, int):
                    raise InvalidArgument(f"invalid bucket map: bucket {seq} has {be!r}, expected backend ids (integers)")

        def run(s: Session) -> GroupView:
            g = self._group(s, ref, db)
            name = self._group_view(s, g).full_name
            problems: list[str] = []
            if len(rows) != g.bucket_num:
                problems.append(f"it has {len(rows)} entries, the group has {g.bucket_num} buckets: give one entry per bucket")
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            for seq, row in enumerate(rows):
                if len(row) != g.replication_num:
                    problems.append(f"bucket {seq} lists {len(row)} backends, the group has replication_num "
                                    f"{g.replication_num}: give one backend per replica")
                if len(set(row)) != len(row):
                    twice = sorted({be for be in row if row.count(be) > 1})
                    problems.append(f"bucket {seq} lists backend {twice[0]} twice: each replica of a bucket must be on a different backend")
                for be in dict.fromkeys(row):
                    b = backends.get(be)
                    if b is None:
                        known = ", ".join(f"{x.id} ({x.name})" for x in sorted(backends.values(), key=lambda x: x.id)) or "none"
                        problems.append(f"bucket {seq} names backend {be}, which does not exist (backends: {known})")
                    elif b.state != "alive":
                        problems.append(f"bucket {seq} names backend {be} ({b.name}), which is {b.state}: only alive backends may hold a bucket")
                hosts = [backends[be].host for be in dict.fromkeys(row) if be in backends]
                if len(set(hosts)) != len(hosts):
                    clash = sorted({h for h in hosts if hosts.count(h) > 1})
                    problems.append(f"bucket {seq} puts two replicas on host {clash[0]}: replicas of a bucket need distinct hosts")
            if problems:
                shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more problems" if len(problems) > 8 else "")
                raise InvalidArgument(f"invalid bucket map for group {name}: {shown}")
            flags = {f: False for f in FLAGS}
            flags.update({r.name: r.value for r in s.scalars(select(m.Flag))})
            running = s.scalar(select(m.Job).where(m.Job.group_id == g.id, m.Job.kind.in_(("relocate", "balance", "repair")),
                                                   m.Job.state == "running").order_by(m.Job.id))
            if not force:
                why = []
                unset = [f for f in ("disable_colocate_balance", "disable_colocate_relocate") if not flags[f]]
                if unset:
                    why.append(f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set, so repair and "
                               f"balance would move the map back (set them with 'colocate flag set <flag> true')")
                if running is not None:
                    why.append(f"balance job {running.id} ({running.kind}) is changing the group")
                if why:
                    raise Conflict(f"refusing to force the bucket map of group {name}: " + "; ".join(why) + "; or pass force")
            old = [list(r.backend_ids) for r in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)
                                                           .order_by(m.BucketMap.bucket_seq))]
            missing: list[str] = []
            if rows != old:
                for r in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)):
                    r.backend_ids = list(rows[r.bucket_seq])
                g.version += 1
                missing = self._unplaced(s, g, rows, backends)
                if missing:
                    g.stable = False
                    g.unstable_reason = (f"bucket map forced by {self.actor}: {len(missing)} replicas are not on the backends "
                                         f"the map names (first: {missing[0]}); a repair clones them there")[:2000]
            self._event(s, "group.set_bucket_map", name, group_id=self._group_view(s, g).group_id, old_map=old,
                        new_map=rows, changed=rows != old, force=bool(force), flags=flags,
                        running_job=running.id if running is not None else None, unplaced=len(missing))
            return self._group_view(s, g, with_map=True)

        return self._tx(run)

    def _unplaced(self, s: Session, g: m.ColocateGroup, rows: list[list[int]], backends: dict) -> list[str]:
        """(table/partition, bucket, backend) of ``rows`` without a verified replica of the visible version."""
        out: list[str] = []
        tables = {t.id: t for t in s.scalars(select(m.Table).where(m.Table.group_id == g.id, m.Table.state == "normal"))}
        if not tables:
            return out
        parts = s.scalars(select(m.Partition).where(m.Partition.table_id.in_(list(tables)), m.Partition.visible_version > 0)
                          .order_by(m.Partition.table_id, m.Partition.value))
        for p in parts:
            have: dict[int, set[int]] = {}
            for seq, be in s.execute(select(m.Replica.bucket_seq, m.Replica.backend_id).where(
                    m.Replica.partition_id == p.id, m.Replica.version == p.visible_version, m.Replica.state == "verified")):
                have.setdefault(seq, set()).add(be)
            for seq, row in enumerate(rows[:p.bucket_num]):
                for be in row:
                    if be not in have.get(seq, set()):
                        out.append(f"{tables[p.table_id].name}/{p.value} bucket {seq} on backend {backends[be].name}")
        return out

    def backend_loads(self) -> dict[int, dict[str, int]]:
        """Per backend id: ``slots`` (bucket-replica entries of every group's map), and ``replicas``
        and ``bytes`` of the verified replicas of visible versions it holds."""
        def run(s: Session) -> dict[int, dict[str, int]]:
            out = {b: {"slots": 0, "replicas": 0, "bytes": 0} for b in s.scalars(select(m.Backend.id))}
            for ids in s.scalars(select(m.BucketMap.backend_ids)):
                for be in ids:
                    out.setdefault(be, {"slots": 0, "replicas": 0, "bytes": 0})["slots"] += 1
            q = (select(m.Replica.backend_id, func.count(), func.coalesce(func.sum(m.Replica.bytes), 0))
                 .join(m.Partition, m.Partition.id == m.Replica.partition_id)
                 .where(m.Replica.state == "verified", m.Replica.version == m.Partition.visible_version)
                 .group_by(m.Replica.backend_id))
            for be, count, size in s.execute(q):
                row = out.setdefault(be, {"slots": 0, "replicas": 0, "bytes": 0})
                row["replicas"], row["bytes"] = int(count), int(size)
            return out

        return self._tx(run)

    def list_jobs(self, *, kinds: Sequence[str] | None = None, states: Sequence[str] | None = None,
                  limit: int = 100) -> list[dict]:
        """Jobs newest first as plain dicts (id, kind, state, group_id, group, plan, progress, times);
        read-only, for the admin API and the Colocation page."""
        def run(s: Session) -> list[dict]:
            q = select(m.Job).order_by(m.Job.id.desc()).limit(max(0, int(limit)))
            if kinds:
                q = q.where(m.Job.kind.in_(list(kinds)))
            if states:
                q = q.where(m.Job.state.in_(list(states)))
            out = []
            for j in s.scalars(q):
                g = s.get(m.ColocateGroup, j.group_id) if j.group_id is not None else None
                view = self._group_view(s, g) if g is not None else None
                out.append({"id": j.id, "kind": j.kind, "state": j.state,
                            "group_id": view.group_id if view else None,
                            "group": view.full_name if view else (j.plan or {}).get("group"),
                            "plan": j.plan or {}, "progress": j.progress or {},
                            "created_at": _utc(j.created_at), "updated_at": _utc(j.updated_at)})
            return out

        return self._tx(run)

    # ------------------------------------------------------------------ events

    def events(self, *, limit: int = 100, kind: str | None = None) -> list[EventView]:
        def run(s: Session) -> list[EventView]:
            q = select(m.Event).order_by(m.Event.id.desc()).limit(limit)
            if kind:
                q = q.where(m.Event.kind == kind)
            return [EventView(e.id, _utc(e.ts), e.kind, e.subject, e.detail, e.actor) for e in s.scalars(q)]

        return self._tx(run)

    def dispose(self) -> None:
        self.engine.dispose()


# ---------------------------------------------------------------------- helpers


def _whoami() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"


def _backend_view(b: m.Backend) -> BackendView:
    return BackendView(id=b.id, name=b.name, root_uri=b.root_uri, host=b.host, capacity_bytes=b.capacity_bytes,
                       state=b.state, state_since=_utc(b.state_since), last_heartbeat=_utc(b.last_heartbeat))


def _partition_view(p: m.Partition) -> PartitionView:
    return PartitionView(id=p.id, table_id=p.table_id, value=p.value, bucket_num=p.bucket_num,
                         replication_num=p.replication_num, visible_version=p.visible_version)


def _check_columns(columns: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    cols: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in columns:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidArgument(f"invalid column {item!r}: expected a (name, type) pair such as ('o_orderkey', 'bigint')")
        name, typ = item
        naming.check_name("column", name)
        if name.lower() in seen:
            raise InvalidArgument(f"duplicate column {name!r}: column names must be unique (case-insensitively)")
        seen.add(name.lower())
        cols.append((name, normalize_type(typ)))
    if not cols:
        raise InvalidArgument("a table needs at least one column, e.g. 'o_orderkey bigint'")
    return cols


def _check_col_list(kind: str, names: Sequence[str], col_types: dict[str, str], *, required: bool) -> list[str]:
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    if required and not names:
        raise InvalidArgument(f"a table needs at least one {kind} column (the bucket key), e.g. dist_cols=['o_orderkey']")
    for n in names:
        if n not in col_types:
            raise InvalidArgument(f"{kind} column {n!r} is not a column of the table: choose from {', '.join(col_types)}")
    if len(set(names)) != len(names):
        raise InvalidArgument(f"{kind} columns {names} name a column twice")
    return names


def _check_counts(bucket_num: object, replication_num: object) -> None:
    if not isinstance(bucket_num, int) or isinstance(bucket_num, bool) or not 1 <= bucket_num <= MAX_BUCKETS:
        raise InvalidArgument(f"invalid bucket count {bucket_num!r}: expected an integer from 1 to {MAX_BUCKETS}, e.g. 16")
    if not isinstance(replication_num, int) or isinstance(replication_num, bool) or not 1 <= replication_num <= 16:
        raise InvalidArgument(f"invalid replication number {replication_num!r}: expected an integer from 1 to 16, e.g. 3")


def _check_replication_vs_backends(s: Session, replication_num: int) -> None:
    alive = list(s.scalars(select(m.Backend).where(m.Backend.state == "alive").order_by(m.Backend.id)))
    hosts = {b.host for b in alive}
    if replication_num > len(hosts):
        listed = ", ".join(f"{b.name}@{b.host}" for b in alive) or "none"
        raise PlacementError(
            f"replication_num {replication_num} needs {replication_num} alive backends on distinct hosts, but only "
            f"{len(hosts)} are eligible ({listed}): add backends ('colocate backend add') or lower replication_num"
        )


def _check_cgs(group: m.ColocateGroup, what: str, dist_types: list[str], bucket_num: int, replication_num: int) -> None:
    """Name every way ``what`` differs from the group's schema, not just the first."""
    problems = []
    want = list(group.dist_col_types)
    if len(dist_types) != len(want):
        problems.append(f"it has {len(dist_types)} distribution columns ({', '.join(dist_types)}), the group has {len(want)} ({', '.join(want)})")
    else:
        for i, (have, need) in enumerate(zip(dist_types, want)):
            if have != need:
                problems.append(f"distribution column {i + 1} has type {have}, the group needs {need}")
    if bucket_num != group.bucket_num:
        problems.append(f"bucket count is {bucket_num}, the group needs {group.bucket_num}")
    if replication_num != group.replication_num:
        problems.append(f"replication_num is {replication_num}, the group needs {group.replication_num}")
    if problems:
        gname = group.name if group.db_id is None else f"{group.db_id}_{group.name}"
        raise SchemaMismatch(f"{what} does not match colocation group {gname}: " + "; ".join(problems))
