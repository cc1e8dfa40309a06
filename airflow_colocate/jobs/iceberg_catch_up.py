"""Catching up an Iceberg table that lagged: one snapshot per commit of ours it missed, in our order.

A user time-travels over an Iceberg table's snapshots expecting one per commit of ours, so a lag
(an unreachable Iceberg catalog, a process killed between our commit and Iceberg's) must not fold
the commits it missed into one. Each publication records the newest event of ours it covers
(``iceberg_publications.event_id``, and the snapshot's :data:`EVENT` property, which survives a
process killed between the Iceberg commit and its record). The next publication reads the table's
commits after it that change what Iceberg shows (a write or overwrite, a partition drop or
recover, a schema change): when there are two or more, every one but the last is replayed as a
snapshot of its own, naming exactly the state right after it (one replica of every bucket of every
partition version visible then; the schema version then). The last one is the present, published
by state as after any commit.

Replica moves (a repair, a balance, a bad replica found) are not replayed one by one: what a user
time-travels over is rows and schema, not which copy holds them. A replayed snapshot names, for
each version, the replica reads prefer now among its verified replicas (on the backend today's
reads choose for that bucket when it holds one), and the last snapshot names today's choice.

The states are found by undoing the missed commits from the present, newest first, read in one
catalog transaction. One transaction of ours that committed several partitions (an import batch,
a retention's drops) is one snapshot: its events share a ``batch``, and no state halfway through it
is published. The versions made visible since the last published event are still on disk because
gc keeps them while a publication lags (``catalog.iceberg.awaited``); the replayed snapshots' pins
keep them after. When a state cannot be named anyway (a version whose rows or files are gone
all the same, a history that does not add up), nothing is replayed: the present is published as
one snapshot, as before, and the outcome line and the log say why. A replayed file is never named
unless it exists.

A publication that covers no known event (published before catalog migration 0013, or turned on
again after being off, when gc kept nothing for it) is by state, one snapshot, as it was. A commit
that lands while a catch-up runs is folded into the catch-up's last snapshot (the present), as
any concurrent commit is into the publication that reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.iceberg import Missed, MissedCommit
from airflow_colocate.core.errors import PlacementError
from airflow_colocate.iceberg import files as wanted

log = logging.getLogger("airflow_colocate.iceberg")
EVENT = "colocate.event-id"  # snapshot property: the newest event of ours the snapshot covers


@dataclass(frozen=True)
class State:
    """What the table showed right after one of our commits."""

    event_id: int
    visible: dict[str, int]  # partition value -> its visible version
    schema_version: int


@dataclass(frozen=True)
class Replay:
    snapshots: int = 0  # missed commits published as snapshots of their own
    note: str | None = None  # why missed commits were folded into one snapshot instead


def covered(tbl) -> int:
    """The newest event the Iceberg table's current snapshot says it covers (0: none said): later
    than our record when a process was killed between the Iceberg commit and its record."""
    snap = tbl.current_snapshot()
    prop = snap.summary.additional_properties.get(EVENT) if snap is not None else None
    return int(prop) if prop and prop.isdigit() else 0


def transactions(commits: list[MissedCommit]) -> list[list[MissedCommit]]:
    """The missed commits as our transactions made them: an import batch's partitions, or a
    retention's drops of one table, are one transaction (their events share a ``batch``) and one
    snapshot, never a state halfway through one."""
    out: list[list[MissedCommit]] = []
    for c in commits:
        if out and c.batch is not None and out[-1][-1].batch == c.batch:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def states(missed: Missed) -> list[State] | str:
    """The states right after each missed transaction but the last, oldest first, or why they
    cannot be told: each commit undone from the present must find what it made."""
    visible = {v: ver for v, (_, ver) in missed.partitions.items() if ver}
    schema = missed.schema_version
    txs = transactions(missed.commits)
    out = []
    for i in range(len(txs) - 1, 0, -1):
        for c in reversed(txs[i]):
            where = f"event {c.event_id} ({c.kind} {c.partition or ''} v{c.version})"
            if c.kind == "schema":
                if schema != c.version:
                    return f"{where}: the schema is at v{schema}"
                schema -= 1
            elif c.kind == "partition.drop":
                if c.partition in visible:
                    return f"{where}: the partition was visible after it"
                visible[c.partition] = c.version
            else:  # a write or a recover made c.version visible
                if visible.get(c.partition) != c.version:
                    return f"{where}: v{visible.get(c.partition, 0)} was visible after it"
                if c.kind == "write.commit" and c.previous:
                    visible[c.partition] = c.previous
                else:
                    visible.pop(c.partition)
        out.append(State(txs[i - 1][-1].event_id, dict(visible), schema))
    return out[::-1]


def version_files(catalog: Catalog, table_id: int, view, keys, choice: dict[str, list[int]], alive: set[int],
                  visible_now: dict[str, int]) -> dict[tuple[str, int], list[wanted.WantedFile]] | str:
    """(partition value, version) -> the files a snapshot names for it, for every version some
    missed state shows (each read once however many states show it), or why one cannot be named:
    a version gone, a file missing. The files of a version not visible now are checked to exist
    (reads check those of the visible ones)."""
    from airflow_colocate.planner.reads import read_table
    from airflow_colocate.storage import fs

    out = {}
    for (value, version), parts in sorted(catalog.iceberg.version_replicas(table_id, keys).items()):
        label = f"{view.qualified_name}/{value} v{version}"
        if parts is None:
            return f"the files of {label} are gone (gc removed the version)"
        chosen = choice.get(value) or next((c for c in choice.values() if len(c) == len(parts.buckets)), None)
        try:
            files = wanted.wanted_files(read_table(view, [parts], available=alive, chosen=chosen))
        except (PlacementError, ValueError) as exc:
            return f"{label} cannot be read: {exc}"
        if visible_now.get(value) != version:
            for f in files:
                uri = fs.join(f.replica_dir, f.path.rpartition("/")[2])
                if not fs.exists(uri):
                    return f"the files of {label} are gone ({uri} is missing)"
        out[(value, version)] = files
    return out


def replay(catalog: Catalog, table_id: int, tbl, current: Callable, commit: Callable) -> Replay:
    """Publish the missed commits of a lagging table but the last, one snapshot each, oldest first.
    ``current()``: today's read plan of the table, whose replica choice the replayed snapshots
    follow (read only when there is something to replay); ``commit(state, files)`` makes one
    snapshot and returns its id. The progress is recorded after each, so a process killed
    half-way resumes where it stopped (the snapshot's :data:`EVENT` covers the one killed between
    the Iceberg commit and its record)."""
    missed = catalog.iceberg.missed(table_id, covered(tbl))
    if missed is None or len(transactions(missed.commits)) < 2:
        return Replay()
    view = catalog.tables.get(table_id)
    found = states(missed)
    plans: list[tuple[State, list]] = []
    if not isinstance(found, str):
        current = current()
        choice = {p.value: [c[0].backend_id if c else -1 for c in p.candidates] for p in current.partitions}
        alive = {b.id for b in catalog.backends.list() if b.state == "alive"}
        keys = {k for state in found for k in state.visible.items()}
        visible_now = {v: ver for v, (_, ver) in missed.partitions.items() if ver}
        by_version = version_files(catalog, table_id, view, keys, choice, alive, visible_now)
        if isinstance(by_version, str):
            found = by_version
        else:
            plans = [(state, sorted((f for k in state.visible.items() for f in by_version[k]), key=lambda f: f.path))
                     for state in found]
    if isinstance(found, str):
        note = (f"{len(transactions(missed.commits))} missed commits published as one snapshot of the present state: "
                f"{found}")
        log.warning("Iceberg catch-up of %s: %s", view.qualified_name, note)
        return Replay(note=note)
    for state, files in plans:
        snapshot_id = commit(state, files)
        catalog.iceberg.replayed(table_id, event_id=state.event_id, snapshot_id=snapshot_id)
    return Replay(snapshots=len(plans))


__all__ = ["EVENT", "Replay", "State", "covered", "replay", "states", "transactions", "version_files"]
