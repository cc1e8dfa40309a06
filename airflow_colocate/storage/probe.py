"""The heartbeat probe of one backend root: write, read back, delete.

A backend that cannot do all three is down. Storage only: the catalog records what the probe saw
(:mod:`airflow_colocate.jobs.health`).
"""

from __future__ import annotations

import os
import socket
import time

from airflow_colocate.storage import fs, identity

HEARTBEAT_DIR = "_colocate/heartbeat"


def probe_root(root_uri: str, *, marker: dict | None = None, tidy: bool = False) -> None:
    """Check the root is this backend's disk (``marker``: backend_id, catalog_id, token, when the
    catalog has one), then write, read back and delete one heartbeat object; raise on any failure.
    Never creates the root: a lost disk must fail here, not come back empty. ``tidy`` (a check
    that promises to change nothing, ``colocate doctor``): the heartbeat folder, when this probe
    made it and it is empty again, is removed too."""
    if not fs.exists(root_uri):
        raise OSError(f"root {root_uri} is missing (a lost or unmounted disk)")
    if marker is not None:
        problem = identity.marker_problem(root_uri, **marker)
        if problem:
            raise OSError(problem)
    name = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(6).hex()}"
    folder, parent = fs.join(root_uri, HEARTBEAT_DIR), fs.join(root_uri, HEARTBEAT_DIR.split("/")[0])
    made = [f for f in (folder, parent) if tidy and not fs.exists(f)]  # innermost first
    uri = fs.join(folder, name)
    payload = f"colocate heartbeat {time.time():.6f} {name}\n"
    fs.write_text_atomic(uri, payload)
    try:
        got = fs.read_text(uri)
        if got != payload:
            raise OSError(f"heartbeat read back {len(got)} bytes that differ from the {len(payload)} written")
    finally:
        fs.delete_file(uri)
        _remove_if_empty(*made)
    if fs.exists(uri):
        raise OSError("heartbeat object is still there after delete")


def _remove_if_empty(*folders: str) -> None:
    """Remove each folder, innermost first, while it holds nothing (another probe's object stays)."""
    for folder in folders:
        try:
            if not fs.exists(folder) or fs.list_files(folder, missing_ok=True) or _has_subdirs(folder):
                return
            fs.delete_tree(folder)
        except OSError:
            return


def _has_subdirs(folder: str) -> bool:
    from airflow_colocate.storage.replica_dir import subdirs

    return bool(subdirs(folder))
