"""Our columns and schema versions as an Iceberg schema.

Field ids must follow our schema versions, not today's columns: an engine that reads an old data
file by Iceberg's name mapping resolves a column by its id, so a column dropped and one added
later must never share one, and a widened column must keep its own. Replaying our versions in
order (create from the first, then each add / drop / widen) gives exactly the ids Iceberg itself
would have given had every change been made on it, and gives them again on any machine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from airflow_colocate.core.errors import ColocateError

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
# Our (Spark SQL) type -> pyiceberg type name. tinyint and smallint are Iceberg ints: Iceberg has
# no narrower integer, and a parquet INT32 with an INT(8)/INT(16) annotation reads as one.
_TYPES = {"tinyint": "int", "smallint": "int", "int": "int", "bigint": "long", "float": "float",
          "double": "double", "boolean": "boolean", "string": "string", "binary": "binary", "date": "date",
          "timestamp": "timestamptz", "timestamp_ntz": "timestamp"}


class NotPublishable(ColocateError):
    """A table state Iceberg cannot express: the publication lags with this reason until it can."""


def iceberg_type(sql_type: str):
    """The pyiceberg type of one of our column types."""
    from pyiceberg import types as it

    m = _DECIMAL.fullmatch(sql_type)
    if m:
        return it.DecimalType(int(m.group(1)), int(m.group(2)))
    name = _TYPES.get(sql_type)
    if name is None:
        raise NotPublishable(f"column type {sql_type!r} has no Iceberg type")
    return {"int": it.IntegerType(), "long": it.LongType(), "float": it.FloatType(), "double": it.DoubleType(),
            "boolean": it.BooleanType(), "string": it.StringType(), "binary": it.BinaryType(), "date": it.DateType(),
            "timestamptz": it.TimestamptzType(), "timestamp": it.TimestampType()}[name]


def first_schema(columns: Sequence[tuple[str, str]]):
    """The Iceberg schema of a table's first schema version: ids 1..n in column order."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    return Schema(*[NestedField(i, name, iceberg_type(t), required=False) for i, (name, t) in enumerate(columns, 1)])


@dataclass(frozen=True)
class Step:
    """One change of one of our schema versions, as Iceberg's schema update takes it."""

    op: str  # add | drop | widen
    column: str
    type: str  # our type after the change ('' for a drop)


def steps(changes: Sequence[Sequence[dict]]) -> list[Step]:
    """Our versions' changes (``table_schemas.change``, oldest first) as Iceberg steps. A widening
    Iceberg cannot read from an old file (``date -> timestamp_ntz``) is refused with its reason:
    publishing it would hand other engines a column they fail on."""
    out = []
    for change in changes:
        for c in change:
            op, name, new = c.get("op"), c.get("column"), c.get("type") or ""
            if op == "widen" and _same(c.get("old"), new):
                continue  # tinyint -> smallint -> int: one Iceberg int all along
            if op == "widen" and not _promotable(c.get("old") or "", new):
                raise NotPublishable(f"column {name!r} was widened {c.get('old')} -> {new}, which Iceberg cannot "
                                     f"read from the files written before (it promotes int -> long, float -> double "
                                     f"and decimal precision only)")
            if op not in ("add", "drop", "widen"):
                raise NotPublishable(f"unknown schema change {op!r} of column {name!r}")
            out.append(Step(op, name, new if op != "drop" else ""))
    return out


def _same(old: str | None, new: str) -> bool:
    return old is not None and _TYPES.get(old) is not None and _TYPES.get(old) == _TYPES.get(new)


def _promotable(old: str, new: str) -> bool:
    if _TYPES.get(old) == "int" and new == "bigint" or (old, new) == ("float", "double"):
        return True
    a, b = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) >= int(a.group(1)))


def apply(update, step: Step) -> None:
    """Make one step on a pyiceberg ``UpdateSchema`` (inside the publishing transaction)."""
    if step.op == "add":
        update.add_column(step.column, iceberg_type(step.type))
    elif step.op == "drop":
        update.delete_column(step.column)
    else:
        update.update_column(step.column, field_type=iceberg_type(step.type))


def partition_value(sql_type: str, value: str):
    """Our partition value (the folder name, e.g. ``2026-11-01``) as the Iceberg partition tuple's
    value of an identity transform on a column of ``sql_type``."""
    try:
        if sql_type == "date":
            return (date.fromisoformat(value) - date(1970, 1, 1)).days
        if sql_type in ("tinyint", "smallint", "int", "bigint"):
            return int(value)
        if sql_type == "timestamp_ntz":
            d = datetime.fromisoformat(value)
            return int((d - datetime(1970, 1, 1)).total_seconds() * 1_000_000)
    except ValueError as exc:
        raise NotPublishable(f"partition value {value!r} is not a {sql_type}: {exc}") from exc
    if sql_type == "string":
        return value
    raise NotPublishable(f"a partition column of type {sql_type} is not published as an Iceberg identity partition "
                         f"(date, integers, timestamp_ntz and string are)")
