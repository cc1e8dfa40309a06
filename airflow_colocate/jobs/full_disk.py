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
    when ``exc`` is not a full disk or names no backend of the catalog."""
    text = str(exc)
    if not is_full(text):
        return None
    try:
        backends = catalog.backends.list()
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
