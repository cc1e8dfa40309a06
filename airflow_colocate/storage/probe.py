"""The heartbeat probe of one backend root: write, read back, delete.

A backend that cannot do all three is down. Storage only: the catalog records what the probe saw
(:mod:`airflow_colocate.jobs.health`).
"""

from __future__ import annotations

import os
import socket
import time

from airflow_colocate.storage import fs

HEARTBEAT_DIR = "_colocate/heartbeat"


def probe_root(root_uri: str) -> None:
    """Write, read back and delete one heartbeat object; raise on any failure."""
    name = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(6).hex()}"
    uri = fs.join(fs.join(root_uri, HEARTBEAT_DIR), name)
    payload = f"colocate heartbeat {time.time():.6f} {name}\n"
    fs.write_text_atomic(uri, payload)
    try:
        got = fs.read_text(uri)
        if got != payload:
            raise OSError(f"heartbeat read back {len(got)} bytes that differ from the {len(payload)} written")
    finally:
        fs.delete_file(uri)
    if fs.exists(uri):
        raise OSError("heartbeat object is still there after delete")
