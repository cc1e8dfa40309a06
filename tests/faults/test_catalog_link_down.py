"""The catalog's PostgreSQL cut off the network while a worker holds an open connection to it: the
worker (a process in a network namespace of its own, catalog_link.py) has used the catalog, then its
link loses every packet, and it creates a table. libpq's defaults would wait for the kernel to give
up on the connection (about 15 minutes of retransmissions); the catalog's TCP timeouts
(``catalog/engine.py``) make it fail within seconds with one line naming the catalog, the table not
created, and the same ``Catalog`` works again once the link is back. Needs root and iproute2; skips
with one line otherwise."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from catalog_link import CatalogLink, unavailable
from pgserver import fresh_pg_database
from sqlalchemy.engine import make_url

from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs.backends import add_backend

pytestmark = pytest.mark.postgres

# the worker: use the catalog (a pooled connection), wait for the cut, create a table, report;
# then again once the link is back
WORKER = """
import json, sys, time
from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs.backends import add_backend
cat = Catalog(sys.argv[1], actor="worker")
cat.tables.list()
print("READY", flush=True)
for line in sys.stdin:
    started = time.monotonic()
    try:
        cat.tables.create(line.strip(), [("id", "bigint"), ("v", "string")], ["id"], bucket_num=2, replication_num=1)
        out = {"ok": True}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    out["seconds"] = time.monotonic() - started
    print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def linked_pg(tmp_path_factory):
    from pgserver import find_pg_bin, start_postgres

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries not found: 'apt-get install postgresql'")
    with CatalogLink() as link:
        server = start_postgres(tmp_path_factory.mktemp("link-pg"), network=(link.hub_ip, link.worker_ip))
        try:
            yield link, server
        finally:
            server.stop()


def _result(proc: subprocess.Popen, timeout: float = 120.0) -> dict:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"the worker said nothing in {timeout:.0f}s: it hangs on the cut connection"
    line = proc.stdout.readline()
    assert line.startswith("RESULT "), line + proc.stderr.read()[-3000:]
    return json.loads(line.removeprefix("RESULT "))


def test_open_connection_cut_fails_in_seconds(linked_pg, tmp_path):
    link, server = linked_pg
    url = fresh_pg_database(server.url)
    local = Catalog(url, actor="pytest")  # the truth, on 127.0.0.1
    local.init()
    (tmp_path / "be1").mkdir()
    add_backend(local, (tmp_path / "be1").as_uri(), name="be1")
    remote = make_url(url).set(host=link.hub_ip).render_as_string(hide_password=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(link.run_inside([sys.executable, "-c", WORKER, remote]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "READY", proc.stderr.read()[-3000:]
        link.cut("loss")
        try:
            proc.stdin.write("cut_off\n")
            proc.stdin.flush()
            got = _result(proc)
        finally:
            link.restore()
        assert "error" in got, got
        error = got["error"]
        assert error.startswith("CatalogUnavailable: catalog database ") and "is unreachable" in error, error
        assert "\n" not in error and "nothing of the operation was committed" in error, error
        print(f"the cut connection failed in {got['seconds']:.1f}s: {error}")
        assert got["seconds"] < 60, got  # not the kernel's quarter of an hour
        assert "cut_off" not in [t.name for t in local.tables.list()]
        proc.stdin.write("back\n")
        proc.stdin.flush()
        again = _result(proc)
        assert again.get("ok"), again  # the same Catalog, on a new connection
        assert {t.name for t in local.tables.list()} == {"back"}
    finally:
        link.restore()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        local.dispose()


@pytest.mark.parametrize("query, idle", [("", 10), ("?keepalives_idle=60", 60)])
def test_timeouts_are_on_the_socket(pg_server_url, query, idle):
    """What the kernel was told, read back from the connection's socket: the defaults, and a URL's
    own parameter winning over them."""
    import socket

    from airflow_colocate.catalog.engine import make_engine

    engine = make_engine(fresh_pg_database(pg_server_url) + query)
    try:
        with engine.connect() as conn:
            fd = conn.connection.dbapi_connection.fileno()
            sock = socket.socket(fileno=os.dup(fd))
            try:
                got = (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                       sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                       sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))
            finally:
                sock.close()
    finally:
        engine.dispose()
    assert got == (1, idle, 15000)
