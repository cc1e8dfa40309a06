"""Real faults for the per-fault-kind tests (a helper module, not a test file).

Each primitive makes the fault the way a machine would meet it, never by patching our code: a file
system that is really full (a size-limited tmpfs), a PostgreSQL server that is really stopped or
whose backend process really ends the connection. Each undoes itself, so a failing test leaves no
mount or stopped server behind. The stalled backend is ``slowfs.py`` (a file system of its own);
the link taken down is the namespace cluster's (``bench/netns_cluster.py``, in test_link_down.py).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from pgserver import PgServer, _as_user, _clean_env, _run


def root_or_skip(*tools: str) -> None:
    """Mounting and links need root and the tools: skip with one line naming what is missing."""
    if os.geteuid() != 0:
        pytest.skip("needs root (mount, ip): run the fault tests as root, as CI does")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH")


@contextmanager
def small_tmpfs(where: Path, size: str = "256k"):
    """A tmpfs of ``size`` mounted on ``where`` (created): writes past its size fail with ENOSPC,
    exactly as a full disk does. Always unmounted (lazily if something still holds a file open)."""
    root_or_skip("mount", "umount")
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path) -> Path:
    """Fill the file system of ``where`` until a write fails with ENOSPC; the filler file is
    returned so a test can delete it (the operator freeing space)."""
    filler = where / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    assert free_space(where) == 0, f"{where} still has {free_space(where)} bytes free"
    return filler


def free_space(where: Path) -> int:
    st = os.statvfs(where)
    return st.f_bavail * st.f_frsize


# --- PostgreSQL ----------------------------------------------------------------------------------

def pg_stop(server: PgServer, mode: str = "immediate") -> None:
    """Stop the server (``immediate``: as a crash, no checkpoint; ``fast``: a clean shutdown)."""
    _run([str(server.bin_dir / "pg_ctl"), "-D", str(server.data_dir), "-m", mode, "-w", "-t", "30", "stop"],
         server._run_as, "pg_ctl stop", server.log_path, 60)


def pg_start(server: PgServer) -> None:
    """Start the same server again, on the same port and socket directory, with synchronous commit
    (the suite's server runs without, so a stop would lose what it had confirmed; fsync stays off:
    the server process dies in these tests, not the machine)."""
    options = (f"-p {server.port} -k {server.socket_dir} -c listen_addresses=127.0.0.1 "
               "-c fsync=off -c synchronous_commit=on -c full_page_writes=off -c max_connections=100")
    _run([str(server.bin_dir / "pg_ctl"), "-D", str(server.data_dir), "-l", str(server.log_path),
          "-w", "-t", "60", "-o", options, "start"], server._run_as, "pg_ctl start", server.log_path, 90)


def pg_terminate_others(server: PgServer, database: str) -> int:
    """Cut every connection to ``database`` from the server side (``pg_terminate_backend``), as an
    administrator or a failover does; returns how many were cut."""
    out = subprocess.run(
        _as_user([str(server.bin_dir / "psql"), "-h", server.host, "-p", str(server.port), "-U", server.user,
                  "-d", "postgres", "-At", "-c",
                  f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{database}' "
                  "AND pid <> pg_backend_pid()"], None),
        env=_clean_env(), capture_output=True, text=True, timeout=30, check=True)
    return int(out.stdout.strip() or 0)


@contextmanager
def pg_down(server: PgServer, mode: str = "immediate"):
    """The server stopped for the block and started again after it, whatever the block did."""
    pg_stop(server, mode)
    try:
        yield
    finally:
        pg_start(server)
