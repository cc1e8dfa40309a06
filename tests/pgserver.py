"""A throw-away PostgreSQL server for the test suite (a helper module, not a test file).

``start_postgres(base_dir)`` runs ``initdb`` into a fresh directory, starts the server on a free
loopback port with a private Unix socket directory, creates the database ``colocate_test`` and
returns a :class:`PgServer` whose ``url`` is a SQLAlchemy URL. ``PgServer.stop()`` shuts it down
with ``pg_ctl -m immediate`` (no checkpoint: the data is thrown away) and is idempotent; it is
also registered with :mod:`atexit` so an interrupted test session does not leave a server behind.

When running as root, ``initdb`` refuses to run, so every server-side command runs as the
``postgres`` OS user through ``runuser -u postgres --`` and the directories are chowned to it.
If ``base_dir`` is not reachable by that user (pytest's ``/tmp/pytest-of-root`` is mode 0700), the
server lives in a private directory under the system temp dir instead, removed on ``stop()``;
its log is then copied to ``base_dir/postgres.log``.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PgServer", "find_pg_bin", "start_postgres", "fresh_pg_database", "DATABASE"]

DATABASE = "colocate_test"
SUPERUSER = "postgres"
OS_USER_WHEN_ROOT = "postgres"

START_TIMEOUT_S = 60
CMD_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30
LOG_TAIL_LINES = 40

INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found in /usr/lib/postgresql/*/bin "
    "or on PATH. Install them with `apt-get install postgresql` (Debian/Ubuntu; "
    "`sudo scripts/setup.sh --with-postgres` does it), `dnf install postgresql-server` (Fedora) "
    "or `brew install postgresql` (macOS), then re-run."
)


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key for /usr/lib/postgresql/<version>/bin: numeric, so 15 > 9.6."""
    version = path.parent.name
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None.

    Debian's versioned directories come first (the highest version wins), then PATH.
    """
    candidates = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if p.is_dir()),
        key=_version_key,
        reverse=True,
    )
    for bin_dir in candidates:
        if _has_server_binaries(bin_dir):
            return bin_dir
    initdb = shutil.which("initdb")
    if initdb:
        bin_dir = Path(initdb).resolve().parent
        if _has_server_binaries(bin_dir):
            return bin_dir
    return None


def _has_server_binaries(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / name, os.X_OK) for name in ("initdb", "pg_ctl"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _clean_env() -> dict[str, str]:
    """The environment without PG* variables (PGHOST, PGDATA, ...) that could redirect commands."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    env.pop("LANG", None)
    env.pop("LANGUAGE", None)
    return env


def _tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None:
        return "(no log)"
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(could not read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


@dataclass
class PgServer:
    """A running test server. ``url`` is a SQLAlchemy URL for database ``colocate_test``."""

    url: str
    port: int
    host: str
    database: str
    user: str
    data_dir: Path
    socket_dir: Path
    log_path: Path
    bin_dir: Path
    listen: str = "127.0.0.1"  # listen_addresses: a restart (tests/nemesis) starts it on the same ones
    _run_as: str | None = field(default=None, repr=False)
    _owned_dirs: list[Path] = field(default_factory=list, repr=False)
    _log_copy: Path | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    def stop(self) -> None:
        """Stop the server at once (``pg_ctl -m immediate``); safe to call more than once."""
        if self._stopped:
            return
        self._stopped = True
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
        pid = _postmaster_pid(self.data_dir)
        if pid is not None:
            cmd = [
                str(self.bin_dir / "pg_ctl"),
                "-D", str(self.data_dir),
                "-m", "immediate",
                "-w", "-t", str(STOP_TIMEOUT_S),
                "stop",
            ]
            stopped = False
            try:
                proc = subprocess.run(
                    _as_user(cmd, self._run_as),
                    env=_clean_env(),
                    cwd="/",
                    capture_output=True,
                    timeout=STOP_TIMEOUT_S + 15,
                    check=False,
                )
                stopped = proc.returncode == 0
            except subprocess.TimeoutExpired:
                pass
            if not stopped and _alive(pid):
                _kill(pid)
        if self._log_copy is not None:
            try:
                shutil.copyfile(self.log_path, self._log_copy)
            except OSError:
                pass
        for path in self._owned_dirs:
            shutil.rmtree(path, ignore_errors=True)

    def __enter__(self) -> "PgServer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Is ``pid`` a live process? A zombie (exited, not yet reaped by init) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (or a race): assume alive
    # the state letter follows the parenthesised command name, which may contain spaces
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _kill(pid: int) -> None:
    """Last resort: SIGKILL the postmaster's children, then the postmaster."""
    try:
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=10, check=False
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        children = []
    for child in children:
        try:
            os.kill(int(child), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _as_user(cmd: list[str], user: str | None) -> list[str]:
    if user is None:
        return cmd
    return ["runuser", "-u", user, "--", *cmd]


def _run(cmd: list[str], user: str | None, what: str, log_path: Path | None, timeout: float) -> str:
    try:
        proc = subprocess.run(
            _as_user(cmd, user),
            env=_clean_env(),
            cwd="/",  # the postgres user may not be able to enter the caller's cwd
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(
            f"{what} timed out after {timeout:.0f}s: {' '.join(cmd)}\n"
            f"--- server log tail ({log_path}) ---\n{_tail(log_path)}"
        ) from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"--- stdout ---\n{proc.stdout.strip()}\n--- stderr ---\n{proc.stderr.strip()}\n"
            f"--- server log tail ({log_path}) ---\n{_tail(log_path)}"
        )
    return proc.stdout


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


def _usable_by(user: str, path: Path) -> bool:
    """Can ``user`` create files in ``path`` (every parent must be searchable by it)?"""
    proc = subprocess.run(
        ["runuser", "-u", user, "--", "test", "-w", str(path), "-a", "-x", str(path)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return proc.returncode == 0


def start_postgres(base_dir: Path, *, network: tuple[str, str] | None = None, durable: bool = False) -> PgServer:
    """Initialise and start a private PostgreSQL server under ``base_dir``; see the module doc.
    ``network``: (an address of this host, a client's address): listen there too and trust that
    client, for clients in a network namespace (tests/faults/catalog_link.py). ``durable``: commit
    synchronously, so a crash of the server (``pg_ctl -m immediate``) keeps every commit it confirmed;
    without, the last ones are lost, which only a test that stops the server can tell."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise RuntimeError(INSTALL_HINT)

    base_dir = Path(base_dir).resolve()
    base_dir.mkdir(parents=True, exist_ok=True)
    owned_dirs: list[Path] = []
    run_as: str | None = None
    log_copy: Path | None = None
    home = base_dir / "pg"

    if os.geteuid() == 0:
        run_as = OS_USER_WHEN_ROOT
        try:
            pw = pwd.getpwnam(run_as)
        except KeyError:
            raise RuntimeError(
                f"running as root, but there is no {run_as!r} OS user to run PostgreSQL as "
                "(initdb refuses to run as root). Install PostgreSQL from your distribution's "
                "packages (they create the user), or run the tests as a normal user."
            ) from None
        if shutil.which("runuser") is None:
            raise RuntimeError("running as root, but `runuser` (util-linux) is not on PATH")
        home.mkdir(exist_ok=True)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        if not _usable_by(run_as, home):
            # e.g. /tmp/pytest-of-root is 0700: keep the server outside, log copied back on stop
            log_copy = base_dir / "postgres.log"
            shutil.rmtree(home, ignore_errors=True)
            home = Path(tempfile.mkdtemp(prefix="colocate-pg-"))
            owned_dirs.append(home)
        os.chown(home, pw.pw_uid, pw.pw_gid)
    else:
        home.mkdir(exist_ok=True)

    data_dir = home / "data"
    log_path = home / "postgres.log"
    # Unix socket paths are limited to ~107 bytes: keep the socket dir short, under /tmp.
    socket_dir = Path(tempfile.mkdtemp(prefix="pgsock-"))
    owned_dirs.append(socket_dir)
    if run_as is not None:
        pw = pwd.getpwnam(run_as)
        _chown_tree(socket_dir, pw.pw_uid, pw.pw_gid)

    if data_dir.exists():
        shutil.rmtree(data_dir)

    try:
        _run(
            [
                str(bin_dir / "initdb"),
                "-D", str(data_dir),
                "--auth=trust",
                f"--username={SUPERUSER}",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            run_as,
            "initdb",
            None,
            CMD_TIMEOUT_S,
        )

        listen = "127.0.0.1"
        if network is not None:
            listen += f",{network[0]}"
            with open(data_dir / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {network[1]}/32 trust\n")
        server: PgServer | None = None
        last_error: RuntimeError | None = None
        for _attempt in range(3):  # a free port can be taken between probe and bind: retry
            port = _free_port()
            options = (
                f"-p {port} -k {socket_dir} -c listen_addresses={listen} "
                f"-c fsync=off -c synchronous_commit={'on' if durable else 'off'} -c full_page_writes=off "
                "-c max_connections=100"
            )
            try:
                _run(
                    [
                        str(bin_dir / "pg_ctl"),
                        "-D", str(data_dir),
                        "-l", str(log_path),
                        "-w", "-t", str(START_TIMEOUT_S),
                        "-o", options,
                        "start",
                    ],
                    run_as,
                    "pg_ctl start",
                    log_path,
                    START_TIMEOUT_S + 30,
                )
            except RuntimeError as exc:
                last_error = exc
                pid = _postmaster_pid(data_dir)
                if pid is not None and _alive(pid):
                    _kill(pid)
                if "could not bind" in _tail(log_path) or "already in use" in _tail(log_path):
                    continue
                raise
            server = PgServer(
                url=f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}",
                port=port,
                host="127.0.0.1",
                database=DATABASE,
                user=SUPERUSER,
                data_dir=data_dir,
                socket_dir=socket_dir,
                log_path=log_path,
                bin_dir=bin_dir,
                listen=listen,
                _run_as=run_as,
                _owned_dirs=owned_dirs,
                _log_copy=log_copy,
            )
            break
        if server is None:
            assert last_error is not None
            raise last_error
    except BaseException:
        for path in owned_dirs:
            shutil.rmtree(path, ignore_errors=True)
        raise

    atexit.register(server.stop)
    try:
        _create_database(server)
    except BaseException:
        server.stop()
        raise
    return server


def _create_database(server: PgServer) -> None:
    createdb = server.bin_dir / "createdb"
    if os.access(createdb, os.X_OK):
        _run(
            [
                str(createdb),
                "-h", server.host,
                "-p", str(server.port),
                "-U", server.user,
                server.database,
            ],
            None,  # a client: fine as root, it connects over TCP with trust auth
            "createdb",
            server.log_path,
            CMD_TIMEOUT_S,
        )
        return
    import psycopg2  # fallback when the client binaries live elsewhere

    conn = psycopg2.connect(
        host=server.host, port=server.port, user=server.user, dbname="postgres", connect_timeout=30
    )
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{server.database}"')
    finally:
        conn.close()


_db_counter = itertools.count()


def fresh_pg_database(server_url: str) -> str:
    """A new, empty database on the test server, so tests never see each other's rows."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"t{os.getpid()}_{next(_db_counter)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)
