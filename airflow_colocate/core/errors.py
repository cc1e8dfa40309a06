"""Errors a user can act on.

Every message says what was wrong and what would be right, because it is read in a task log or a
terminal by someone who did not write the call. The CLI prints ``str(error)`` as one line.
"""

from __future__ import annotations


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
