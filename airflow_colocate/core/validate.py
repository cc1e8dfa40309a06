"""The one set of checks every command's input goes through before the command changes anything:
numbers (finite, in range, an id that fits a 64-bit column), durations, free text (a reason, an
actor: printable, one line, short enough for its database column) and URIs.

Each returns the value to use or raises :class:`~airflow_colocate.core.errors.InvalidArgument`
with one line saying what was wrong and what would be right. The standard library only: the CLI's
option types, the catalog and the jobs all call these.
"""

from __future__ import annotations

import math
from datetime import timedelta

from airflow_colocate.core.errors import InvalidArgument

MAX_ID = 2 ** 63 - 1  # a BIGINT column, and SQLite's INTEGER
MAX_REASON = 500  # a backend's state reason is "admin: <reason>" in a String(1024) column; events keep it whole
MAX_ACTOR = 128  # events.actor is String(128)
MAX_URI = 1024  # backends.root_uri is String(1024)
MAX_HOURS = 24 * 366 * 100  # a century: beyond it a duration is a typo (and timedelta overflows at ~2.7 million years)
MAX_SHOWN = 60
MAX_ARGUMENT = 65_536  # any other argument: a column list, a name  # how much of a refused value a refusal quotes


def shown(value: object) -> str:
    """A refused value as a refusal quotes it: ``repr`` (escapes control characters, so the
    refusal stays one line), cut to :data:`MAX_SHOWN` characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN]}..."


def number(value: object, what: str, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite float within ``[minimum, maximum]``; ``nan``, ``inf`` and anything else refused."""
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgument(f"invalid {what} {shown(value)}: expected a number") from None
    if not math.isfinite(out):
        raise InvalidArgument(f"invalid {what} {shown(value)}: expected a finite number")
    _check_range(out, value, what, minimum, maximum)
    return out


def integer(value: object, what: str, *, minimum: int | None = None, maximum: int = MAX_ID) -> int:
    """An integer within ``[minimum, maximum]`` (at most a 64-bit id by default)."""
    if isinstance(value, bool):
        raise InvalidArgument(f"invalid {what} {shown(value)}: expected an integer")
    try:
        out = value if isinstance(value, int) else int(str(value).strip(), 10)
    except ValueError:
        raise InvalidArgument(f"invalid {what} {shown(value)}: expected an integer") from None
    _check_range(out, value, what, minimum, maximum)
    return out


def _check_range(out: float, value: object, what: str, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and out < minimum:
        wanted = "must not be negative" if minimum == 0 else f"expected {_plain(minimum)} or more"
        raise InvalidArgument(f"invalid {what} {shown(value)}: {wanted}")
    if maximum is not None and out > maximum:
        raise InvalidArgument(f"invalid {what} {shown(value)}: expected at most {_plain(maximum)}")


def _plain(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def duration(value: object, what: str, *, unit: str, minimum: float = 0.0) -> timedelta:
    """A duration given in ``unit`` (``"hours"``, ``"minutes"``, ``"seconds"``): finite, at least
    ``minimum``, at most a century."""
    per_hour = {"hours": 1.0, "minutes": 60.0, "seconds": 3600.0}[unit]
    amount = number(value, what, minimum=minimum, maximum=MAX_HOURS * per_hour)
    return timedelta(**{unit: amount})


def free_text(value: object, what: str, *, max_len: int, required: bool = True) -> str | None:
    """A reason, an actor, a name a person typed: one line of printable characters (no control
    character such as a newline, tab or terminal escape; no line separator; no undecodable byte), stripped, 1 to ``max_len`` characters. ``required=False``: empty is None."""
    if value is None and not required:
        return None
    text = value.strip() if isinstance(value, str) else None
    if text is None or (not text and required):
        raise InvalidArgument(f"invalid {what} {shown(value)}: expected 1 to {max_len} printable characters")
    if not text:
        return None
    if len(text) > max_len:
        raise InvalidArgument(f"invalid {what} {shown(value)}: {len(text)} characters, at most {max_len} fit")
    if any(_breaks_line(c) for c in text):
        raise InvalidArgument(f"invalid {what} {shown(value)}: only printable characters on one line "
                              f"(no newline, tab or terminal escape)")
    return text


def argument(value: str, what: str, *, max_len: int = MAX_ARGUMENT) -> str:
    """Any other text a command is given (a name, a column list, a filter): no undecodable bytes,
    no control character but tab and line breaks, at most ``max_len`` characters. Refused here so
    that it reaches neither the database (a driver that cannot encode it fails inside) nor a
    terminal."""
    if len(value) > max_len:
        raise InvalidArgument(f"invalid {what} {shown(value)}: {len(value)} characters, at most {max_len}")
    if any(_bad_char(c) for c in value):
        raise InvalidArgument(f"invalid {what} {shown(value)}: it holds a control character or bytes that are not "
                              f"UTF-8 text")
    return value


ONE_LINE = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]*$"  # what _breaks_line refuses, as a JSON schema pattern


def _breaks_line(c: str) -> bool:
    """A character free text may not hold: a control character (newline, tab, escape, C1), a line
    or paragraph separator, or an undecodable byte (a lone surrogate)."""
    code = ord(c)
    return code < 32 or 0x7F <= code < 0xA0 or code in (0x2028, 0x2029) or 0xD800 <= code < 0xE000


def _bad_char(c: str) -> bool:
    code = ord(c)
    return (code < 32 and c not in "\t\n\r") or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000


def reason(value: object, *, required: bool = False) -> str | None:
    """``--reason``: kept in the event log and shown with a state."""
    return free_text(value, "reason", max_len=MAX_REASON, required=required)


def actor(value: object, source: str = "actor") -> str:
    """``--actor`` or ``$COLOCATE_ACTOR``: who the event log names (``events.actor``)."""
    return free_text(value, source, max_len=MAX_ACTOR)  # type: ignore[return-value]


def uri(value: object, what: str = "URI") -> str:
    """A root or source URI or path: not empty (an unset variable), printable, at most :data:`MAX_URI`."""
    text = free_text(value, what, max_len=MAX_URI)
    assert text is not None
    return text


__all__ = ["MAX_ACTOR", "argument", "MAX_ID", "MAX_REASON", "MAX_URI", "actor", "duration", "free_text", "integer", "number",
           "reason", "shown", "uri"]
