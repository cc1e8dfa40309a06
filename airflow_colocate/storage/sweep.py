"""Find the temporary copies killed jobs left on a backend, for ``colocate gc``.

Copies are staged in the backend's tmp area (:func:`~airflow_colocate.storage.layout.tmp_dir`)
and renamed into place when verified; a job killed in between leaves its temporary file there. Its
name says when the copy started (:func:`~airflow_colocate.storage.replica_dir.tmp_time`); a name without
a time (made before 0.2, when temporary files were written next to the bucket file, inside replica
directories) is aged by its modification time. ``deep`` also walks the replica directories for
such old temporary names: a listing of every directory of the backend, so it is asked for.
"""

from __future__ import annotations

import os
import time

from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs, layout

# Not replica directories: the write job's staging (gc removes it through the catalog) and the
# heartbeat folder (the probe cleans it).
_SKIP = (layout.STAGING, "_colocate")


def _walk(uri: str) -> list[tuple[str, float | None]]:
    """(URI, modification time) of every file below ``uri``."""
    if fs.is_local(uri):
        base = fs.local_path(uri)
        out = []
        for top, dirs, files in os.walk(base):
            if top == base:
                dirs[:] = [d for d in dirs if d not in _SKIP]
            for name in files:
                path = os.path.join(top, name)
                try:
                    out.append((fs.join(uri, os.path.relpath(path, base).replace(os.sep, "/")), os.stat(path).st_mtime))
                except FileNotFoundError:
                    continue
        return out
    from pyarrow.fs import FileSelector, FileType

    filesystem, path = fs._arrow(uri)
    infos = filesystem.get_file_info(FileSelector(path, allow_not_found=True, recursive=True))
    out = []
    for i in infos:
        rel = i.path[len(path):].lstrip("/")
        if i.type != FileType.File or rel.split("/", 1)[0] in _SKIP:
            continue
        out.append((fs.join(uri, rel), i.mtime.timestamp() if i.mtime is not None else None))
    return out


def _listing(area: str) -> list[tuple[str, float | None]]:
    if fs.is_local(area):
        base = fs.local_path(area)
        try:
            with os.scandir(base) as it:
                return [(fs.join(area, e.name), e.stat().st_mtime) for e in it if e.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []
    from pyarrow.fs import FileSelector, FileType

    filesystem, path = fs._arrow(area)
    infos = filesystem.get_file_info(FileSelector(path, allow_not_found=True, recursive=False))
    return [(fs.join(area, i.base_name), i.mtime.timestamp() if i.mtime is not None else None)
            for i in infos if i.type == FileType.File]


def _age_ok(uri: str, mtime: float | None, cutoff: float) -> bool:
    started = replica_dir.tmp_time(fs.basename(uri))
    when = started if started is not None else mtime
    return when is not None and when <= cutoff


def stale_temps(root: str, *, older_than_seconds: float, deep: bool = False, now: float | None = None) -> list[str]:
    """URIs of the temporary copies on the backend at ``root`` started at least
    ``older_than_seconds`` ago: everything in its tmp area, and with ``deep`` every temporary name
    in its replica directories. A missing root yields nothing (and is not created)."""
    if not fs.exists(root):
        return []
    cutoff = (time.time() if now is None else now) - older_than_seconds
    found = [uri for uri, mtime in _listing(layout.tmp_dir(root)) if _age_ok(uri, mtime, cutoff)]
    if deep:
        found += [uri for uri, mtime in _walk(root)
                  if replica_dir.is_tmp_name(fs.basename(uri)) and _age_ok(uri, mtime, cutoff)]
    return sorted(found)
