"""Validation of user-supplied names and partition values.

Names end up in file paths on every backend and in SQL, so they are restricted to a safe alphabet
instead of being escaped in a dozen places.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from airflow_colocate.core.errors import InvalidArgument

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Partition values such as 2026-11-01, 202611, eu_west, 2026-11-01T00 — never a path separator,
# never a leading dot (which excludes "." and ".."), never whitespace.
_PARTITION_VALUE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]{0,127}")
GLOBAL_GROUP_PREFIX = "__global__"


def check_name(kind: str, name: object) -> str:
    """Return ``name`` if it is a valid identifier for ``kind`` (table, group, database, backend)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgument(
            f"invalid {kind} name {name!r}: use 1-64 letters, digits or underscores, "
            f"starting with a letter or underscore (e.g. 'orders', 'g_orders')"
        )
    return name


def is_name(text: object) -> bool:
    """Whether ``text`` is a plain name (a group, table or backend name) rather than an id."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


def check_group_name(name: object) -> str:
    """Group names are identifiers; a ``__global__`` prefix makes the group span databases."""
    check_name("group", name)
    assert isinstance(name, str)
    if name.startswith(GLOBAL_GROUP_PREFIX) and len(name) == len(GLOBAL_GROUP_PREFIX):
        raise InvalidArgument(
            f"invalid group name {name!r}: a global group needs a name after the prefix, "
            f"e.g. '{GLOBAL_GROUP_PREFIX}orders'"
        )
    return name


def is_global_group(name: str) -> bool:
    return name.startswith(GLOBAL_GROUP_PREFIX)


def check_partition_value(value: object) -> str:
    """Return ``value`` if it can safely name a partition directory."""
    if not isinstance(value, str) or not _PARTITION_VALUE.fullmatch(value) or ".." in value:
        raise InvalidArgument(
            f"invalid partition value {value!r}: use up to 128 letters, digits and _ . : + -, "
            f"not starting with '.', without '..' or '/' (e.g. '2026-11-01')"
        )
    return value


def split_qualified(name: str, default_db: str) -> tuple[str, str]:
    """``db.table`` -> (db, table); a bare ``table`` lives in ``default_db``."""
    if not isinstance(name, str):
        raise InvalidArgument(f"invalid table name {name!r}: expected 'table' or 'db.table'")
    if name.count(".") > 1:
        raise InvalidArgument(f"invalid table name {name!r}: expected 'table' or 'db.table'")
    db, _, table = name.rpartition(".")
    db = db or default_db
    return check_name("database", db), check_name("table", table)


_INT_RANGES = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_EXAMPLES = {"date": "'2026-11-01'", "timestamp": "'2026-11-01T00:00:00'", "timestamp_ntz": "'2026-11-01T00:00:00'",
             "boolean": "'true' or 'false'"}


def check_partition_literal(value: str, column: str, col_type: str) -> str:
    """Refuse a partition value that Spark could not read back as the partition column's type: a
    ``date`` partition named ``2026-13-45`` would be written, then read as NULL and never joined."""
    problem = None
    if col_type == "date":
        try:
            ok = bool(_DATE.fullmatch(value)) and date.fromisoformat(value) is not None
        except ValueError as exc:
            ok, problem = False, str(exc)
        if not ok:
            problem = problem or "expected YYYY-MM-DD"
    elif col_type in ("timestamp", "timestamp_ntz"):
        try:
            datetime.fromisoformat(value)
        except ValueError as exc:
            problem = str(exc)
    elif col_type in _INT_RANGES:
        bits = _INT_RANGES[col_type]
        try:
            number = int(value, 10)
        except ValueError:
            problem = "not a whole number"
        else:
            if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
                problem = f"out of the {col_type} range"
    elif col_type == "boolean":
        if value.lower() not in ("true", "false"):
            problem = "not true or false"
    elif col_type in ("float", "double") or col_type.startswith("decimal"):
        try:
            Decimal(value)
        except InvalidOperation:
            problem = "not a number"
    if problem:
        example = _EXAMPLES.get(col_type, "a value of that type")
        raise InvalidArgument(f"invalid partition value {value!r} for column {column} of type {col_type} ({problem}): "
                              f"expected {example}")
    return value
