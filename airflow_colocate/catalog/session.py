"""Plumbing every part of the catalog shares: the engine, one retried transaction per change, its event row, the clock, flags and the event log."""

from __future__ import annotations

import gc
import getpass
import os
import random
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from typing import TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.engine import default_url, make_engine
from airflow_colocate.catalog.migrate import current_revision, head_revision, migrate
from airflow_colocate.catalog.rows import DEFAULT_DB
from airflow_colocate.model.views import EventView
from airflow_colocate.core import naming
from airflow_colocate.core.errors import (
    ColocateError,
    InvalidArgument,
    NotFound,
)
from airflow_colocate.core.times import utc

T = TypeVar("T")


FLAGS = ("disable_colocate_balance", "disable_colocate_relocate", "disable_colocate_join")


_RETRIES = 30

_gc_lock = threading.Lock()
_gc_holders = 0  # bulk transactions running with the cyclic collector paused by us
_gc_paused = False  # whether we paused it (never re-enable a collector someone else disabled)


@contextmanager
def _gc_paused_for_bulk():
    """Pause Python's cyclic garbage collector while a bulk transaction runs (``tx(..., bulk=True)``).

    A repair's registration makes tens of thousands of short-lived rows, tuples and dicts. They hold
    no reference cycles (reference counting frees them), but every 700 allocations the collector
    runs anyway, and now and then a full collection walks every object of the process (Airflow's
    and Spark's modules: ~250,000): 100-200 ms each, measured inside the repair's catalog time
    (bench/bench_repair_catalog.py prints it). Paused, the allocations of a transaction count as
    one collection's worth; cyclic garbage it leaves is collected by the next collection after it.
    Only the repair's few bulk transactions ask for it (a web server's or triggerer's ordinary
    transactions overlap on threads and would keep the collector off for long stretches)."""
    global _gc_holders, _gc_paused
    with _gc_lock:
        if _gc_holders == 0:
            _gc_paused = gc.isenabled()
            if _gc_paused:
                gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_paused:
                _gc_paused = False
                gc.enable()


def _gc_after_fork() -> None:
    """A child forked while another thread held a bulk transaction inherits the pause and, maybe, the
    lock held: it starts afresh, with the collector on if we were the ones who paused it."""
    global _gc_lock, _gc_holders, _gc_paused
    _gc_lock = threading.Lock()
    if _gc_holders and _gc_paused:
        gc.enable()
    _gc_holders, _gc_paused = 0, False


os.register_at_fork(after_in_child=_gc_after_fork)


def _retryable(exc: DBAPIError) -> bool:
    code = getattr(exc.orig, "pgcode", None)
    if code in ("40001", "40P01", "23505"):  # serialization failure, deadlock, unique race
        return True
    text = str(exc.orig).lower()
    return "database is locked" in text or "database table is locked" in text or "unique constraint failed" in text


def _out_of_space(exc: DBAPIError) -> bool:
    """SQLite's SQLITE_FULL and PostgreSQL's disk_full: no retry helps until someone frees space,
    and the one who must is told so, not handed a driver's traceback."""
    text = str(exc.orig).lower()
    return (getattr(exc.orig, "pgcode", None) == "53100" or "database or disk is full" in text
            or "no space left on device" in text)


def _full(url, exc: DBAPIError) -> ColocateError:
    where = url.render_as_string(hide_password=True)
    return ColocateError(f"the catalog's disk is full ({where}: {str(exc.orig).splitlines()[0]}): this change was "
                         "not committed; free space on the catalog's file system and run it again")


def _whoami() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"


class CatalogSession:
    """Plumbing every part of the catalog shares: the engine, one retried transaction per change, its event row, the clock, flags and the event log."""

    def __init__(self, url: str | None = None, *, actor: str | None = None,
                 clock: Callable[[], datetime] | None = None, engine: Engine | None = None):
        self.url = url or default_url()
        self.engine = engine or make_engine(self.url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.actor = actor or os.environ.get("COLOCATE_ACTOR") or _whoami()
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._atomic = threading.local()  # .session, .events: an atomic() block running on this thread

    def now(self) -> datetime:
        return self._clock()

    def init(self) -> None:
        """Create or upgrade the schema and the ``default`` database; safe to run again."""
        migrate(self.engine)
        self.tx(lambda s: self.database_id(s, DEFAULT_DB, create=True))

    def check_schema(self) -> None:
        """Refuse to work on a database that was never initialised or is behind the code."""
        current = current_revision(self.engine)
        if current != head_revision():
            raise ColocateError(
                f"catalog at {self.engine.url.render_as_string(hide_password=True)} is at schema "
                f"{current or 'none'}, the code needs {head_revision()}: run 'colocate init' first"
            )

    def tx(self, fn: Callable[[Session], T], *, bulk: bool = False) -> T:
        """Run ``fn`` in one transaction, retried on serialization failures and deadlocks.
        ``bulk``: a repair's registration-sized transaction, run with the cyclic collector paused.
        Inside :meth:`atomic`, ``fn`` runs in the block's one transaction."""
        outer = getattr(self._atomic, "session", None)
        if outer is not None:
            return fn(outer)
        delay = 0.01
        for attempt in range(_RETRIES):
            try:
                with _gc_paused_for_bulk() if bulk else nullcontext(), self._sessions.begin() as session:
                    return fn(session)
            except (OperationalError, IntegrityError, DBAPIError) as exc:
                if _out_of_space(exc):
                    raise _full(self.engine.url, exc) from exc
                if attempt == _RETRIES - 1 or not _retryable(exc):
                    raise
            time.sleep(delay * (1 + random.random()))  # outside the pause: another thread may need a collection
            delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")

    def event(self, s: Session, kind: str, subject: str, **detail) -> None:
        events = getattr(self._atomic, "events", None)
        if events is not None:
            events.append((kind, subject, detail))
            return
        s.add(m.Event(ts=self.now(), kind=kind, subject=subject, detail=detail, actor=self.actor))

    @contextmanager
    def atomic(self, kind: str, subject: str):
        """Several changes (the repositories' own methods, called inside the block) as one
        transaction with one event: all of them are committed or none. One change keeps its own
        event; several make one ``kind`` event whose detail lists each change's kind and detail."""
        if getattr(self._atomic, "session", None) is not None:
            raise AssertionError("atomic() blocks do not nest")
        events: list[tuple[str, str, dict]] = []
        try:
            with self._committed(kind, subject, events) as session:
                yield session
        except DBAPIError as exc:
            if _out_of_space(exc):
                raise _full(self.engine.url, exc) from exc
            raise

    @contextmanager
    def _committed(self, kind: str, subject: str, events: list):
        with self._sessions.begin() as session:
            self._atomic.session, self._atomic.events = session, events
            try:
                yield session
                self._atomic.events = None
                if len(events) == 1:
                    self.event(session, *events[0][:2], **events[0][2])
                elif events:
                    self.event(session, kind, subject, changes=[{"kind": k, **d} for k, _, d in events])
            finally:
                self._atomic.session = self._atomic.events = None

    def database_id(self, s: Session, name: str, *, create: bool = False) -> int:
        naming.check_name("database", name)
        row = s.scalar(select(m.Database).where(m.Database.name == name))
        if row:
            return row.id
        if not create:
            raise NotFound(f"unknown database {name!r}: create a table in it first, or use '{DEFAULT_DB}'")
        row = m.Database(name=name, created_at=self.now())
        s.add(row)
        s.flush()
        self.event(s, "database.create", name)
        return row.id

    def set_flag(self, name: str, value: bool) -> None:
        if name not in FLAGS:
            raise InvalidArgument(f"unknown flag {name!r}: expected one of {', '.join(FLAGS)}")

        def run(s: Session) -> None:
            row = s.get(m.Flag, name)
            if row is None:
                s.add(m.Flag(name=name, value=bool(value), updated_at=self.now()))
            else:
                row.value, row.updated_at = bool(value), self.now()
            self.event(s, "flag.set", name, value=bool(value))

        self.tx(run)

    def flags(self) -> dict[str, bool]:
        def run(s: Session) -> dict[str, bool]:
            values = {f: False for f in FLAGS}
            values.update({r.name: r.value for r in s.scalars(select(m.Flag))})
            return values

        return self.tx(run)

    def events(self, *, limit: int = 100, kind: str | None = None, before: int | None = None) -> list[EventView]:
        """The newest ``limit`` events (of ``kind``), older than event id ``before`` when given."""
        def run(s: Session) -> list[EventView]:
            q = select(m.Event).order_by(m.Event.id.desc()).limit(limit)
            if kind:
                q = q.where(m.Event.kind == kind)
            if before is not None:
                q = q.where(m.Event.id < before)
            return [EventView(e.id, utc(e.ts), e.kind, e.subject, e.detail, e.actor) for e in s.scalars(q)]

        return self.tx(run)

    def dispose(self) -> None:
        self.engine.dispose()

