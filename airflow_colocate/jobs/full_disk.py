"""A job that stopped on a full disk, said with the backend's name.

The Spark side only knows paths (executors never see the catalog), so the line it raises names a
root such as ``file:///data/be3``; the person reading the task log thinks in backend names and
needs to know that nothing of the operation is visible and what to do."""

from __future__ import annotations

from airflow_colocate.core.errors import StorageFull, summary
from airflow_colocate.storage import fs

_FULL = ("no space left on device", "errno 28", "disk quota exceeded")


def is_full(text: str) -> bool:
    return any(w in text.lower() for w in _FULL)


def full_backend(catalog, exc: BaseException, operation: str) -> StorageFull | None:
    """``exc`` as one line naming the full backend (found by its root in the message), or None
    when ``exc`` is not a full disk or names no backend of the catalog. ``catalog``: the catalog,
    or a function returning it, called only for a full disk."""
    text = str(exc)
    if not is_full(text):
        return None
    try:
        backends = (catalog() if callable(catalog) else catalog).backends.list()
    except Exception:  # the catalog failing too: the original error says more than this one would
        return None
    for b in backends:
        roots = {b.root_uri.rstrip("/")}
        if fs.is_local(b.root_uri):
            roots.add(fs.local_path(b.root_uri).rstrip("/"))
        if any(r + "/" in text or text.endswith(r) or r + ":" in text for r in roots):
            line, _ = summary(text)
            return StorageFull(f"backend {b.name} ({b.root_uri}) is full: {line}; {operation} was aborted and nothing "
                               f"of it is visible: free space on {b.name} (or decommission it), then run it again")
    return None


FULL_BELOW = 64 * 1024  # free bytes under which a work dir counts as full: a plan or a report needs more


def work_dir_full(report_uri: str) -> StorageFull | None:
    """Why a job left no report (and no ``.error`` line: that needs space too), when the reason is a
    full work dir; None when the work dir has room or is not a local directory."""
    if not fs.is_local(report_uri):
        return None
    import os

    where = fs.local_path(fs.parent(report_uri))
    while where and not os.path.isdir(where):
        where = os.path.dirname(where.rstrip("/"))
    try:
        st = os.statvfs(where or "/")
    except OSError:
        return None
    if st.f_bavail * st.f_frsize >= FULL_BELOW:
        return None
    return StorageFull(f"the work dir {fs.parent(report_uri)} has no space left on its disk: the Spark job could not "
                       f"write its report {report_uri}; nothing of the job is committed: free space there (or set "
                       "another work_dir), then run it again")
