"""A backend's identity on disk: a marker file at its root, written once at ``backend add``.

A lost disk that comes back empty, or another backend's disk mounted in its place, must never look
alive: a probe that merely writes a heartbeat would recreate the folders and report success while
every replica is gone. So the probe requires this marker, with the token the catalog recorded, and
never creates the root or the marker; only an explicit, logged ``colocate backend reinit`` writes a
new one on a replaced disk.
"""

from __future__ import annotations

import json
import secrets
from urllib.parse import urlsplit

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import fs

MARKER = "_colocate/backend.json"


def new_token() -> str:
    return secrets.token_hex(16)


def marker_uri(root: str) -> str:
    return fs.join(root, MARKER)


def check_root_usable(root: str) -> None:
    """The root must already exist and take a write: a typo must not become an empty backend.

    The probe file sits at the root itself, not in ``_colocate/``: a root that is then refused
    (a taken name, a root inside another backend's) is left exactly as it was, without a marker
    folder that would make it look half-added."""
    if fs.is_object_store(root):  # a prefix is nothing until an object is put under it: its bucket must be there
        bucket = root.split("://", 1)[0] + "://" + urlsplit(root).netloc
        if not fs.is_dir(bucket):
            raise ColocateError(f"backend root {root}: the bucket {bucket} does not exist or these credentials "
                                f"cannot see it: create it (or grant access) first, then add the backend again")
    elif not fs.exists(root) or not fs.is_dir(root):
        raise ColocateError(f"backend root {root} does not exist: create it (and mount the disk) first, "
                            f"then add it again")
    probe = fs.join(root, f".colocate-add-probe-{secrets.token_hex(4)}")
    try:
        fs.write_text_atomic(probe, "colocate add probe\n")
        fs.delete_file(probe)
    except OSError as exc:
        raise ColocateError(f"backend root {root} is not writable ({exc}): fix its permissions, then add it again") from None


def write_marker(root: str, *, backend_id: int, name: str, catalog_id: str, token: str) -> None:
    check_root_usable(root)
    fs.write_text_atomic(marker_uri(root), json.dumps(
        {"backend_id": backend_id, "name": name, "catalog_id": catalog_id, "token": token}, sort_keys=True) + "\n")


def marker_folder(root: str) -> str:
    return fs.join(root, MARKER.split("/")[0])


def remove_marker(root: str, *, folder_too: bool) -> None:
    """Take back a marker this process has just written (the add it belonged to failed), and its
    folder when the same add created it, so the root is as it was before."""
    fs.delete_file(marker_uri(root))
    if folder_too and fs.exists(marker_folder(root)):
        fs.delete_tree(marker_folder(root))


def read_marker(root: str) -> dict | None:
    try:
        text = fs.read_text(marker_uri(root))
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def marker_problem(root: str, *, backend_id: int, catalog_id: str, token: str) -> str | None:
    """Why ``root`` is not this backend's disk any more (None when it is). Reads, never writes."""
    if not fs.exists(root):
        return f"root {root} is missing (a lost or unmounted disk)"
    marker = read_marker(root)
    if marker is None:
        return f"identity marker {MARKER} is missing under {root} (a lost or replaced disk)"
    if marker.get("catalog_id") != catalog_id or marker.get("backend_id") != backend_id:
        return (f"identity marker under {root} names backend {marker.get('name', '?')} (id {marker.get('backend_id')}) "
                f"of another catalog or backend (a swapped disk)")
    if marker.get("token") != token:
        return f"identity marker under {root} has another token (the disk was re-initialised elsewhere)"
    return None
