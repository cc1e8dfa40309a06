"""Publishing colocated tables as Iceberg tables: after each of our commits, on demand, and the
expiry of their snapshots.

The order is fixed: our commit first (it never waits for Iceberg), then the pins of the replica
directories the new snapshot will name, then the Iceberg commit, then its record here. A process
killed anywhere in between leaves our data committed and readable, at worst an Iceberg table one
commit behind (doctor shows it; the next commit of the table or ``colocate iceberg publish``
finishes it) and pins that keep a few folders longer. A publication names what the catalog holds
now, and records the newest event of ours it covers; a catch-up after a lag first replays the
commits it missed but the last, one snapshot each in our order, each naming the state right after
its commit (``jobs/iceberg_catch_up.py``), so N missed commits are N snapshots. A repeated publish
is none.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.partitions import DEFAULT_RECYCLE_BIN
from airflow_colocate.core.errors import ColocateError, InvalidArgument
from airflow_colocate.iceberg import files as wanted
from airflow_colocate.jobs.iceberg_catch_up import EVENT, replay
from airflow_colocate.model.views import IcebergPublicationView

log = logging.getLogger("airflow_colocate.iceberg")
# A JSON object of pyiceberg catalog properties ({"type": "rest", "uri": "http://..."}) for an
# Iceberg catalog of the user's; unset: a SQL catalog on the colocation catalog's own database.
CATALOG_ENV = "COLOCATE_ICEBERG_CATALOG"
WAREHOUSE_ENV = "COLOCATE_ICEBERG_WAREHOUSE"
RETRIES = (0.2, 1.0)  # the pauses between the attempts of one publication after our commit
MAX_TOUCHED = 16  # a commit that changed more partitions (a large import batch) reads the whole table once


@dataclass(frozen=True)
class Outcome:
    table: str
    snapshot_id: int | None = None
    added: int = 0
    removed: int = 0
    schema_steps: int = 0
    error: str | None = None
    replayed: int = 0  # missed commits of ours published first, one snapshot each (a catch-up)
    note: str | None = None  # why a catch-up published missed commits as one snapshot instead

    def line(self) -> str:
        if self.error:
            return f"{self.table}: Iceberg metadata lags: {self.error}"
        caught = f"; {self.replayed} missed commit(s) published before it, one snapshot each" if self.replayed else ""
        caught += f"; {self.note}" if self.note else ""
        if not (self.added or self.removed or self.schema_steps):
            return f"{self.table}: Iceberg table up to date (snapshot {self.snapshot_id}){caught}"
        return (f"{self.table}: Iceberg snapshot {self.snapshot_id}: {self.added} file(s) added, {self.removed} "
                f"removed, {self.schema_steps} schema change(s){caught}")


def iceberg_catalog(catalog: Catalog):
    """The Iceberg catalog publications go to (see :data:`CATALOG_ENV`)."""
    import json

    try:
        from airflow_colocate.iceberg.publisher import open_catalog
    except ImportError as exc:  # pragma: no cover - the extra missing
        raise ColocateError("publishing Iceberg tables needs pyiceberg: pip install 'airflow-colocate[iceberg]'") from exc
    props = None
    if os.environ.get(CATALOG_ENV):
        try:
            props = json.loads(os.environ[CATALOG_ENV])
        except ValueError as exc:
            raise InvalidArgument(f"{CATALOG_ENV} must be a JSON object of pyiceberg catalog properties, e.g. "
                                  f'{{"type": "rest", "uri": "http://iceberg:8181"}}: {exc}') from exc
    return open_catalog(catalog.url, props, dict(os.environ))


def enable(catalog: Catalog, table: str, on: bool, *, warehouse: str | None = None,
           db: str | None = None) -> IcebergPublicationView:
    """``--iceberg on|off``: on publishes at once (a failure there is a lag, shown, not an error)."""
    pub = catalog.iceberg.set_enabled(table, on, warehouse=warehouse or os.environ.get(WAREHOUSE_ENV) or None, db=db)
    if on:
        publish_one(catalog, pub, retries=())
    return catalog.iceberg.get(pub.table_id)


def enable_group(catalog: Catalog, group: str, on: bool, *, warehouse: str | None = None,
                 db: str | None = None) -> list[Outcome]:
    """``group alter G --iceberg on|off``: every table of the group (and those created in it
    later) published or not; on publishes each now (a failure there is a lag, shown)."""
    if warehouse is not None and not on:
        raise InvalidArgument("--iceberg-warehouse goes with --iceberg on: it is where the Iceberg metadata is written")
    ids = catalog.iceberg.set_group(group, on, warehouse=warehouse or os.environ.get(WAREHOUSE_ENV) or None, db=db)
    return [publish_one(catalog, catalog.iceberg.get(i), retries=()) for i in ids]


def ensure_published(catalog: Catalog, table: str, on: bool | None, *, warehouse: str | None = None) -> bool:
    """An operator's ``iceberg=``: the table's publication turned on (or off) when it is not yet;
    the commit that follows publishes it. None leaves it as it is. True: turned on just now (a task
    that may commit nothing, an import of partitions all imported already, publishes it itself)."""
    check_iceberg_args(on, warehouse)
    if on is None:
        return False
    pub = catalog.iceberg.find(catalog.tables.get(table).id)
    if pub is None and not on:
        return False
    if pub is None or pub.enabled != on:
        catalog.iceberg.set_enabled(table, on, warehouse=warehouse or os.environ.get(WAREHOUSE_ENV) or None)
        return bool(on)
    return False


def check_iceberg_args(on: bool | None, warehouse: str | None, *, table: str | None = "",
                       table_arg: str = "table") -> None:
    """An operator's ``iceberg=`` / ``iceberg_warehouse=``, refused before the task does anything
    (``table``: the table they publish, None when the task has none)."""
    if on is not None and table is None:
        raise InvalidArgument(f"iceberg={on!r} publishes {table_arg} as an Iceberg table: give {table_arg} too")
    if on not in (None, True, False):
        raise InvalidArgument(f"iceberg={on!r}: give True (publish the table as an Iceberg table), False (stop) "
                              f"or None (leave it as it is)")
    if warehouse is not None and on is not True:
        raise InvalidArgument(f"iceberg_warehouse={warehouse!r} goes with iceberg=True: it is where the Iceberg "
                              f"metadata is written")


def follow(catalog: Catalog, table_ids: Iterable[int], *, partitions: Sequence[str] | None = None) -> list[Outcome]:
    """After one of our commits: publish the tables among ``table_ids`` that are published. Never
    raises and never undoes anything of ours: a failure is retried, then recorded as a lag.
    ``partitions``: the only partitions the commit changed (a write's), so only theirs are read."""
    try:
        pubs = catalog.iceberg.list(table_ids)
    except Exception as exc:  # noqa: BLE001 - our commit is done; Iceberg must not fail it
        log.warning("Iceberg publication skipped: %s", exc)
        return []
    return [publish_one(catalog, p, touched=partitions) for p in pubs]


def follow_all(catalog: Catalog, *, changed: object = True) -> list[Outcome]:
    """:func:`follow` for every published table, when something ``changed``: after replicas were
    marked bad, repaired or moved, which may change the replica reads prefer in any partition (a
    table left as it was commits nothing)."""
    if not changed:
        return []
    try:
        ids = [p.table_id for p in catalog.iceberg.list()]
    except Exception as exc:  # noqa: BLE001 - as follow
        log.warning("Iceberg publication skipped: %s", exc)
        return []
    return follow(catalog, ids) if ids else []


def publish(catalog: Catalog, table: str | None = None, *, db: str | None = None) -> list[Outcome]:
    """``colocate iceberg publish [T]``: bring one published table (or every one) up to date now,
    comparing every partition with the Iceberg table (what a commit of ours compares is only the
    partitions it changed)."""
    pubs = [catalog.iceberg.get(table, db=db)] if table else catalog.iceberg.list()
    return [publish_one(catalog, p, retries=(), whole=True) for p in pubs]


def publish_one(catalog: Catalog, pub: IcebergPublicationView, *, retries=RETRIES, whole: bool = False,
                touched: Sequence[str] | None = None) -> Outcome:
    """One table's publication, attempted ``1 + len(retries)`` times; the outcome is recorded."""
    error = "not attempted"
    for pause in (None, *retries):
        if pause is not None:
            time.sleep(pause)
        try:
            out = _publish(catalog, pub, whole, touched)
        except Exception as exc:  # noqa: BLE001 - recorded as the lag's reason, one line
            error = " ".join(f"{type(exc).__name__}: {exc}".split())[:1000]
            out, refused = None, isinstance(exc, ColocateError)  # our own refusal: a retry would say it again
        if _dropped_meanwhile(catalog, pub):
            return Outcome(pub.table, error="the table was dropped while it was published: its Iceberg table is dropped again")
        if out is None:
            if refused:
                break
            continue
        catalog.iceberg.published(pub.table_id, digest=out[1], snapshot_id=out[0].snapshot_id,
                                  partition_digests=out[2], event_id=out[3])
        p, caught = out[0], out[4]
        return Outcome(pub.table, p.snapshot_id, p.added, p.removed, p.schema_steps, replayed=caught.snapshots,
                       note=caught.note)
    try:
        catalog.iceberg.lagging(pub.table_id, error)
    except Exception as exc:  # noqa: BLE001
        log.warning("Iceberg lag of %s not recorded: %s", pub.table, exc)
    log.warning("Iceberg metadata of %s lags: %s", pub.table, error)
    return Outcome(pub.table, error=error)


def _dropped_meanwhile(catalog: Catalog, pub: IcebergPublicationView) -> bool:
    """A drop of the table that ran while this publication was under way dropped its Iceberg table,
    which this publication may have created again (:func:`publisher.table_for` makes a missing
    one): dropped once more here, so an Iceberg table never outlives its table (it would name
    files gc deletes after the purge). True: the table is dropped (or purged)."""
    from airflow_colocate.core.errors import NotFound
    from airflow_colocate.iceberg.publisher import drop_table

    try:
        if catalog.tables.get(pub.table_id).dropped_at is None:
            return False
    except NotFound:
        pass
    except Exception:  # noqa: BLE001 - the catalog cannot say (it is down): the publication's own outcome stands
        return False
    try:
        drop_table(iceberg_catalog(catalog), (pub.namespace, pub.table.rpartition(".")[2]), pub.table_id)
    except Exception as exc:  # noqa: BLE001 - the next purge drops it (its publication row keeps the files)
        log.warning("Iceberg table of dropped %s not dropped again yet: %s", pub.table, exc)
    return True


def desired(catalog: Catalog, table_id: int):
    """(table view, the files its Iceberg table must name, their digest): what reads prefer now."""
    view = catalog.tables.get(table_id)
    files = wanted.wanted_files(_current_read(catalog, view))
    return view, files, wanted.digest(files, view.schema_version)


def _publish(catalog: Catalog, pub: IcebergPublicationView, whole: bool = False,
             touched: Sequence[str] | None = None):
    """One attempt. The Iceberg table is loaded BEFORE our catalog is read, and its commit asserts
    the snapshot it loaded: a concurrent publication that commits in between fails this one (to be
    retried on fresher facts), so the last snapshot to land always names the newest state. The
    commits a lag missed are replayed first, one snapshot each (:func:`replay`)."""
    from airflow_colocate.iceberg.publisher import AT, publish, table_for

    history = catalog.schemas.history(pub.table_id)
    view = catalog.tables.get(pub.table_id)
    part = _partition_col(view, history[0].columns)
    tbl = table_for(iceberg_catalog(catalog), (pub.namespace, view.name), wanted.iceberg_uri(pub.location), view.id,
                    history[0].columns, part)

    def changes_after(version: int, upto: int | None = None):
        return [h.change for h in history if h.version > version and (upto is None or h.version <= upto)]

    def commit(state, files) -> int | None:
        catalog.iceberg.pin(view.id, wanted.replica_dirs(files))  # before the Iceberg commit names them
        return publish(tbl, schema_version=state.schema_version,
                       changes_after=lambda v: changes_after(v, state.schema_version), partition_col=part,
                       files=files, digest=wanted.digest(files, state.schema_version),
                       snapshot_properties={AT: catalog.now().isoformat(), EVENT: str(state.event_id)}).snapshot_id

    caught = replay(catalog, pub.table_id, tbl, lambda: _current_read(catalog, view), commit)
    before = None if whole else catalog.iceberg.partition_digests(pub.table_id)
    if touched is not None and before is not None and len(touched) <= MAX_TOUCHED:
        view, files = desired_in(catalog, pub.table_id, touched)
        parts = {p: d for p, d in before.items() if p not in touched} | wanted.partition_digests(files)
        only = set(touched)
    else:
        view, files, _ = desired(catalog, pub.table_id)
        parts = wanted.partition_digests(files)
        only = None if whole else wanted.changed_partitions(parts, before)
    digest = wanted.digest_of(parts, view.schema_version)
    history = catalog.schemas.history(view.id)
    head = catalog.iceberg.head()  # after the state was read: what this snapshot covers
    catalog.iceberg.pin(view.id, wanted.replica_dirs(files))  # before the Iceberg commit names them
    out = publish(tbl, schema_version=view.schema_version, changes_after=changes_after, partition_col=part,
                  files=files, digest=digest, snapshot_properties={AT: catalog.now().isoformat(), EVENT: str(head)},
                  only=only)
    return out, digest, parts, head, caught


def _current_read(catalog: Catalog, view):
    """Today's read plan of the whole table: the replica choice a catch-up's snapshots follow."""
    from airflow_colocate.jobs.read import read_plans

    return read_plans(catalog, {view.qualified_name: None}).tables[0]


def desired_in(catalog: Catalog, table_id: int, partitions: Sequence[str]):
    """:func:`desired` for some partitions only (those a commit changed; one not visible now, a
    dropped one, names no file)."""
    from airflow_colocate.core.errors import NotFound
    from airflow_colocate.jobs.read import read_plans

    view = catalog.tables.get(table_id)
    files = []
    for value in sorted(set(partitions)):
        try:
            reads = read_plans(catalog, {view.qualified_name: [value]})
        except NotFound:
            continue
        files += wanted.wanted_files(reads.tables[0])
    return view, files


def _partition_col(view, first_columns) -> tuple[str, str] | None:
    if not view.partition_cols:
        return None
    types = {n.lower(): t for n, t in (*first_columns, *view.columns)}
    return view.partition_cols[0], types[view.partition_cols[0].lower()]


def expire(catalog: Catalog, table: str | None = None, *, retention: timedelta = DEFAULT_RECYCLE_BIN,
           db: str | None = None) -> list[str]:
    """Expire the snapshots published longer than ``retention`` ago (never a table's current one),
    then make gc's pins exactly what the retained snapshots name. One line per table."""
    from airflow_colocate.iceberg.publisher import expire as expire_snapshots
    from airflow_colocate.iceberg.publisher import retained_dirs, table_for

    pubs = [catalog.iceberg.get(table, db=db)] if table else catalog.iceberg.list(enabled_only=False)
    icat = iceberg_catalog(catalog) if pubs else None
    roots = [b.root_uri for b in catalog.backends.list()]
    lines = []
    for pub in pubs:
        view = catalog.tables.get(pub.table_id)
        if pub.snapshot_id is None:
            lines.append(f"{pub.table}: nothing published yet")
            continue
        tbl = table_for(icat, (pub.namespace, view.name), wanted.iceberg_uri(pub.location), view.id, (), None)
        gone = expire_snapshots(tbl, (catalog.now() - retention).isoformat())
        tbl = tbl.refresh()
        _, files, _ = desired(catalog, pub.table_id)
        # what the retained snapshots name, and what a publication about to commit has pinned
        retained = {wanted.our_uri(d, roots) for d in retained_dirs(tbl)}  # as the pins name them (s3a://)
        released = catalog.iceberg.set_pins(view.id, retained | set(wanted.replica_dirs(files)))
        lines.append(f"{pub.table}: {len(gone)} snapshot(s) expired, {len(tbl.metadata.snapshots)} retained, "
                     f"{released} replica folder(s) released to gc")
    return lines


def expire_quietly(catalog: Catalog, retention: timedelta = DEFAULT_RECYCLE_BIN) -> list[str]:
    """:func:`expire` for the maintenance DAG: a failure is logged, and gc only keeps more files."""
    try:
        return expire(catalog, retention=retention) if catalog.iceberg.list(enabled_only=False) else []
    except Exception as exc:  # noqa: BLE001
        log.warning("Iceberg snapshot expiry skipped: %s", exc)
        return []


def withdraw(catalog: Catalog, table_id: int, *, forget: bool) -> bool:
    """Drop a dropped table's Iceberg table (an engine reading it would see a table we dropped, and
    after the purge, files gc deleted), its metadata folder, then its pins: in that order, so a
    process killed in between leaves pins that keep files longer, never a snapshot naming a
    deleted file; running it again finishes. ``forget``: the table is being purged, the
    publication goes too (otherwise a recover publishes it again). False: nothing was published."""
    from airflow_colocate.iceberg.publisher import drop_table
    from airflow_colocate.storage import fs

    pub = catalog.iceberg.find(table_id)
    if pub is None:
        return False
    drop_table(iceberg_catalog(catalog), (pub.namespace, pub.table.rpartition(".")[2]), table_id)
    try:  # the metadata files (never a data file: those are our replicas, outside the warehouse)
        fs.delete_tree(pub.location)
    except Exception as exc:  # noqa: BLE001 - the catalog entry is gone: nothing reads these files any more
        log.warning("Iceberg metadata of %s left at %s: %s", pub.table, pub.location, exc)
    catalog.iceberg.withdrawn(table_id, forget=forget)
    return True


def lag(catalog: Catalog) -> list[str]:
    """Doctor's lines: every published table whose Iceberg metadata is behind our catalog, and why."""
    out = []
    for pub in catalog.iceberg.list():
        try:
            _, _, digest = desired(catalog, pub.table_id)
        except Exception as exc:  # noqa: BLE001 - a table no read can serve cannot be published either
            out.append(f"{pub.table}: Iceberg metadata cannot follow: {' '.join(str(exc).split())[:300]}")
            continue
        if digest == pub.digest:
            continue
        since = f" since {pub.lag_since:%Y-%m-%d %H:%M}" if pub.lag_since else ""
        why = pub.lag_reason or "a commit of ours was not published yet (a process stopped between the two commits)"
        out.append(f"{pub.table}: Iceberg metadata lags{since}: {why}; 'colocate iceberg publish {pub.table}' catches up")
    return out


__all__ = ["Outcome", "check_iceberg_args", "enable", "enable_group", "ensure_published", "expire", "follow", "follow_all", "lag", "publish",
           "publish_one", "withdraw"]
