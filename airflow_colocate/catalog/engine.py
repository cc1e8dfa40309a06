"""Where the catalog lives and how transactions are made safe against concurrent writers.

SQLite serialises writers with ``BEGIN IMMEDIATE`` (taking the write lock when a transaction
starts, not when it first writes, so two tasks can never read-modify-write the same row); WAL
journaling keeps readers unblocked. PostgreSQL runs every transaction SERIALIZABLE; a transaction
that loses a race is retried from the start by :meth:`airflow_colocate.catalog.session.CatalogSession.tx`.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.paths import colocate_home


def default_url() -> str:
    """``COLOCATE_CATALOG_URL`` if set, else the embedded SQLite file under ``$COLOCATE_HOME``."""
    url = os.environ.get("COLOCATE_CATALOG_URL")
    if url:
        return url
    return f"sqlite:///{colocate_home() / 'catalog.db'}"


# A catalog reached over a network that goes away must fail in seconds, not hang: by libpq's defaults
# a connection waits for the kernel, about two minutes for a new one and a quarter of an hour for
# an open one whose packets are lost (retransmissions), while the operation holds its task slot.
# With these, a lost link is a dead connection within ~25 s, which the transaction retries and then
# reports as the catalog unreachable. A URL's own query parameters (``?keepalives_idle=60``) win.
PG_NETWORK_TIMEOUTS = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
                       "keepalives_count": 3, "tcp_user_timeout": 15000}
LIBPQ_DRIVERS = ("psycopg2", "psycopg")  # drivers that hand these to libpq (pg8000, asyncpg do not)


def make_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError with a terse message
        raise InvalidArgument(
            f"invalid catalog URL {url!r}: expected e.g. 'sqlite:////path/catalog.db' or "
            f"'postgresql://user:pass@host:5432/colocate'"
        ) from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every test
            # Let SQLAlchemy, not pysqlite, issue BEGIN, so that it can be BEGIN IMMEDIATE.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # pragma: no cover - exercised by every test
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if backend == "postgresql":
        timeouts = {k: v for k, v in PG_NETWORK_TIMEOUTS.items() if k not in parsed.query}
        return create_engine(url, isolation_level="SERIALIZABLE", pool_pre_ping=True,
                             connect_args=timeouts if parsed.get_driver_name() in LIBPQ_DRIVERS else {})
    raise InvalidArgument(
        f"unsupported catalog database {backend!r} in {url!r}: use sqlite:// (embedded) or postgresql://"
    )
