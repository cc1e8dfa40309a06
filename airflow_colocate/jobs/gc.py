"""``colocate gc``: delete the files no visible version needs, backend by backend.

A backend whose file system cannot be opened (a name node down, a bucket's credentials gone), or
whose root is not its own disk any more (an unmounted disk's empty mount point), is skipped with
its reason: its garbage stays listed in the catalog for the next gc, and the others
are cleaned now. Files are deleted before their rows are forgotten, so a crash in between only means
the next gc deletes nothing and forgets them; a file that could not be deleted is not forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from airflow_colocate.model.views import GarbageItem
from airflow_colocate.jobs.health import not_their_disks, one_line_reason
from airflow_colocate.storage import fs, sweep


@dataclass
class GcResult:
    items: list[GarbageItem] = field(default_factory=list)  # deleted (or, in a dry run, to delete)
    temps: list[str] = field(default_factory=list)  # temporary copies of killed jobs, likewise
    unreachable: dict[str, str] = field(default_factory=dict)  # backend name (or scheme://host) -> reason
    failed: list[tuple[str, str]] = field(default_factory=list)  # (uri, reason): not deleted, not forgotten
    skipped: int = 0  # garbage items left on unreachable backends for the next gc
    held: int = 0  # garbage items a retained Iceberg snapshot names: kept until it expires
    awaited: int = 0  # garbage items a lagging Iceberg table's catch-up will name: kept until it has


def _owner(uri: str, roots: dict[str, str]) -> str | None:
    """The name of the backend whose root holds ``uri`` (longest root wins)."""
    best = None
    for root, name in roots.items():
        r = root.rstrip("/")
        if (uri == r or uri.startswith(r + "/")) and (best is None or len(r) > len(best[0])):
            best = (r, name)
    return best[1] if best else None


def collect_garbage(catalog, *, grace: timedelta, stale_after: timedelta, deep: bool = False,
                    dry_run: bool = False) -> GcResult:
    """Delete (unless ``dry_run``) the catalog's garbage and the stale temporary copies on every
    reachable backend (alive or decommissioning; a down backend's copies go when it is back)."""
    out = GcResult()
    backends = [b for b in catalog.backends.list() if b.state != "decommissioned"]
    unreachable = not_their_disks(catalog, backends)
    names = {b.id: b.name for b in backends}
    out.unreachable = {names[i]: reason for i, reason in unreachable.items()}
    roots = {b.root_uri: b.name for b in backends}
    for b in backends:
        if b.state not in ("alive", "decommissioning") or b.id in unreachable:
            continue
        try:
            out.temps += sweep.stale_temps(b.root_uri, older_than_seconds=stale_after.total_seconds(), deep=deep)
        except Exception as exc:  # noqa: BLE001 - opened a moment ago, gone now: report it, go on
            out.unreachable[b.name] = one_line_reason(exc)
    done, kept = [], set()  # kept: versions with a file left behind, whose rows must stay
    garbage = catalog.writes.garbage(grace=grace, stale_after=stale_after, claim=not dry_run)
    held = catalog.iceberg.held(i.uri for i in garbage)  # named by a retained Iceberg snapshot
    awaited = catalog.iceberg.awaited()  # versions a lagging Iceberg table's catch-up names, one snapshot a commit
    for item in garbage:
        owner = _owner(item.uri, roots)
        # a version's folders (not its write's staging) that a catch-up names
        named = item.reason.endswith(" version") and (item.partition_id, item.version) in awaited
        if item.uri in held or named:
            if item.uri in held:
                out.held += 1
            else:
                out.awaited += 1
            kept.add((item.partition_id, item.version))
            continue
        if owner in out.unreachable:
            out.skipped += 1
            kept.add((item.partition_id, item.version))
            continue
        if not dry_run:
            try:
                fs.delete_tree(item.uri)
            except Exception as exc:  # noqa: BLE001 - left for the next gc, named now
                reason = one_line_reason(exc)
                if owner is None and "cannot open a file system" in reason:
                    parts = urlsplit(item.uri)
                    out.unreachable[f"{parts.scheme}://{parts.netloc}"] = reason
                out.failed.append((item.uri, reason))
                kept.add((item.partition_id, item.version))
                continue
        done.append(item)
    if not dry_run:
        # a version is forgotten only once every file of it is gone (its rows list them all)
        catalog.writes.forget_garbage([i for i in done if i.partition_id is None or (i.partition_id, i.version) not in kept])
        gone = set(done)
        catalog.writes.release_garbage([i for i in garbage if i.target_id is not None and i not in gone])
        for uri in list(out.temps):
            try:
                fs.delete_file(uri)
            except Exception as exc:  # noqa: BLE001
                out.failed.append((uri, one_line_reason(exc)))
                out.temps.remove(uri)
    out.items = done
    return out


def delete_replicas(catalog, items) -> tuple[list[int], list[tuple[str, str]]]:
    """Delete the folders of dropped replicas (``DropItem``), none on a backend whose root is not
    its own disk now (deleting there removes nothing, and forgetting the rows would strand the
    files once the disk is back): the replica ids deleted, and (path, reason) of those left."""
    ids = {i.backend_id for i in items}
    away = not_their_disks(catalog, [b for b in catalog.backends.list() if b.id in ids])
    held = catalog.iceberg.held(i.path for i in items)
    gone, left = [], []
    for item in items:
        try:
            if item.path in held:
                raise OSError("a retained Iceberg snapshot names it: kept until 'colocate iceberg expire' expires it")
            if item.backend_id in away:
                raise OSError(away[item.backend_id])
            fs.delete_tree(item.path)
            gone.append(item.replica_id)
        except Exception as exc:  # noqa: BLE001 - left for the next run, named now
            left.append((item.path, f"{type(exc).__name__}: {exc}"))
    return gone, left


__all__ = ["GcResult", "collect_garbage", "delete_replicas"]
