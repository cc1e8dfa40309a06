"""Errors a user can act on.

Every message says what was wrong and what would be right, because it is read in a task log or a
terminal by someone who did not write the call. The CLI prints ``str(error)`` as one line.
"""

from __future__ import annotations

import errno
import re


class ColocateError(Exception):
    """Base of every error this package raises on purpose."""


class InvalidArgument(ColocateError, ValueError):
    """The input itself is malformed (a bad name, a bucket count of 0, ...)."""


class NotFound(ColocateError, LookupError):
    """A named database, table, group, partition or backend does not exist."""


class AlreadyExists(ColocateError):
    """A name or root that must be unique is taken."""


class SchemaMismatch(ColocateError):
    """A table or partition does not fit its colocation group schema (CGS)."""


class PlacementError(ColocateError):
    """The backends cannot hold the requested replicas under the placement rules."""


class Conflict(ColocateError):
    """The request is valid but the current state forbids it (e.g. removing a busy backend)."""


class CatalogUnavailable(ColocateError):
    """The catalog database could not take the change: it is down, cut the connection, or its
    disk is full. Nothing of the operation is visible; running it again once that is fixed is safe."""


class StorageFull(ColocateError, OSError):
    """A backend or the work dir has no space left; what the operation wrote is not visible. Still
    an ``OSError`` with ``errno.ENOSPC``, so code that handled the bare error handles this one."""

    def __init__(self, message: str, *rest) -> None:
        OSError.__init__(self, errno.ENOSPC, rest[0] if rest else message)  # (errno, message) when unpickled

    def __str__(self) -> str:
        return self.strerror


_JAVA_LINE = re.compile(r":?\s*((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)\b.*)")
MAX_LINE = 400


def summary(text: object, limit: int = MAX_LINE) -> tuple[str, bool]:
    """A library's message as one line, and whether anything was left out: its first line (for
    a message passed through from a JVM, the Java exception's own line, not the Py4J preamble or
    the stack trace), at most ``limit`` characters. ``--verbose`` prints the whole text."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return "", False
    first = lines[0]
    if "An error occurred while calling" in first or first.startswith("py4j"):
        java = next((found.group(1) for line in lines[1:] if (found := _JAVA_LINE.match(line))), None)
        first = java or first
    one = " ".join(first.split())
    return one[:limit], len(lines) > 1 or len(one) > limit
