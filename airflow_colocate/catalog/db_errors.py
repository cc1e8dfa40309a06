"""The catalog database's own failures, told apart from a user's mistake and said in one line.

A driver's error for a stopped server or a full disk is a multi-line traceback naming a socket or
a SQLite status; the person reading the task log needs to know it was the catalog (not the data,
not the backends), that the operation did not happen, and what to do."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from airflow_colocate.core.errors import CatalogUnavailable

# PostgreSQL SQLSTATEs of a server that is going away or not there yet: admin_shutdown,
# crash_shutdown, cannot_connect_now, and the whole connection_exception class.
_PG_GONE = ("57P01", "57P02", "57P03")
_GONE_WORDS = ("could not connect", "connection refused", "server closed the connection", "terminating connection",
               "connection already closed", "the database system is", "ssl connection has been closed",
               "connection to server", "no connection to the server", "server process", "broken pipe")
_FULL_WORDS = ("database or disk is full", "no space left on device", "could not extend file")


def is_disconnect(exc: BaseException) -> bool:
    """The connection to the server is gone or cannot be made (stopped, restarted, cut)."""
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    code = getattr(exc.orig, "pgcode", None) or ""
    if code in _PG_GONE or code.startswith("08"):
        return True
    text = str(exc.orig).lower()
    return any(w in text for w in _GONE_WORDS)


def is_full(exc: BaseException) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    code = getattr(exc.orig, "pgcode", None) or ""
    return code in ("53100", "53200") or any(w in str(exc.orig).lower() for w in _FULL_WORDS)


def _first_line(exc: DBAPIError) -> str:
    lines = [line.strip() for line in str(exc.orig).splitlines() if line.strip()]
    return lines[0] if lines else type(exc.orig).__name__


def catalog_failure(exc: BaseException, url: str, *, committing: bool = False) -> CatalogUnavailable | None:
    """The one-line error for ``exc`` when it is the catalog database failing, else None. ``committing``:
    it happened on COMMIT, so whether the database applied the change is not known to us."""
    if is_full(exc):
        what = "has no space left on its disk"
        todo = "free space on the catalog's disk (or move the catalog), then run the operation again"
    elif is_disconnect(exc):
        what = "is unreachable"
        todo = "check that the database is up and reachable, then run the operation again"
    else:
        return None
    outcome = ("the commit was not confirmed: if the operation shows as done, it is; if not, nothing of it is visible"
               if committing else "nothing of the operation was committed")
    failure = CatalogUnavailable(f"catalog database {url} {what} ({_first_line(exc)}): {outcome}; {todo}")
    failure.public = f"the catalog database {what}: {outcome}; {todo}"  # no URL, no driver text (a host)
    return failure
