"""Schema versions of a table: add, drop and widen columns in metadata, never by rewriting files.

A table's ``columns`` is its current schema; every change makes a new ``table_schemas`` row and
bumps ``tables.schema_version``. Reads register the current schema and Spark's parquet reader does
the rest per file: a column added later reads as null from older files, a dropped one is not
selected, and a widened one is read as the new type (Spark 4's type widening, for exactly the
widenings :func:`widening` allows). The distribution and partition columns are the group schema
(they decide which bucket and directory a row lives in), so they never change. A name dropped
once is never taken again: parquet matches columns by name, so a re-added column would bring the
old files' values back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.rows import table_row, table_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.model.views import SchemaVersionView, TableView
from airflow_colocate.core import naming
from airflow_colocate.core.errors import InvalidArgument, SchemaMismatch
from airflow_colocate.core.sqltypes import normalize_type
from airflow_colocate.core.times import utc

_INTS = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
RESERVED = "__bucket"  # the registration's bucket column
MAX_RETENTION_DAYS = 36500

WIDENINGS = ("tinyint -> smallint -> int -> bigint", "float -> double",
             "decimal(p,s) -> decimal(q,s) with q > p", "date -> timestamp_ntz")


def widening(old: str, new: str) -> str | None:
    """None when every ``old`` value reads losslessly as ``new`` from an old file (the widenings
    Spark's parquet readers, vectorized and not, apply to files written before); else why not.
    ``date -> timestamp`` is refused: Spark reads a parquet date as a session-zone timestamp only
    as timestamp_ntz (checked in tests/schema)."""
    if old == new:
        return f"it is already {new}"
    if old in _INTS and new in _INTS:
        return None if _INTS.index(new) > _INTS.index(old) else f"{old} -> {new} is a narrowing, which could lose values"
    if (old, new) == ("float", "double"):
        return None
    a, b = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    if a and b:
        if a.group(2) != b.group(2):
            return f"{old} -> {new} changes the scale, which rounds or rescales every value"
        if int(b.group(1)) < int(a.group(1)):
            return f"{old} -> {new} is a narrowing, which could lose values"
        return None
    if (old, new) == ("date", "timestamp_ntz"):
        return None
    if (old, new) == ("date", "timestamp"):
        return "date -> timestamp is not read from old files by Spark; widen to timestamp_ntz"
    return f"{old} -> {new} is not a lossless widening"


def _history_names(s: Session, table_id: int) -> set[str]:
    names = set()
    for cols in s.scalars(select(m.TableSchema.columns).where(m.TableSchema.table_id == table_id)):
        names.update(n.lower() for n, _ in cols)
    return names


def record_version(s: Session, t: m.Table, change: list[dict] | None, now) -> None:
    """Store the table's current columns as its schema version ``t.schema_version``."""
    s.add(m.TableSchema(table_id=t.id, version=t.schema_version, columns=[list(c) for c in t.columns],
                        change=change, created_at=now))


def check_retention(days: int | None) -> int | None:
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS:
        raise InvalidArgument(f"invalid retention {days!r} days: expected a whole number of days from 1 to "
                              f"{MAX_RETENTION_DAYS} (e.g. 1095 for three years), or none to keep every partition")
    return days


def check_retention_of(t: m.Table, label: str, days: int | None) -> None:
    if days is not None and not t.partition_cols:
        raise InvalidArgument(f"cannot set a retention on {label}: it is not partitioned, and retention drops "
                              f"partitions by their date value (partition by a date column such as 'dt')")


def _pairs(kind: str, items) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if isinstance(item, str):
            words = item.strip().split(None, 1)
            if len(words) != 2:
                raise InvalidArgument(f"invalid --{kind}-column {item!r}: expected 'name type', e.g. 'discount double'")
            item = words
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidArgument(f"invalid {kind} column {item!r}: expected a (name, type) pair such as ('discount', 'double')")
        out.append((naming.check_name("column", item[0]), normalize_type(item[1])))
    return out


class Schemas:
    """Schema changes (add, drop, widen columns) as versions, and a table's retention."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def alter(self, ref: str | int, *, add: Sequence = (), drop: Sequence[str] = (), widen: Sequence = (),
              db: str | None = None) -> TableView:
        """Apply the changes as ONE new schema version and one event, or refuse them all with the rule
        that forbids the first bad one. ``add``/``widen``: (name, type) pairs or 'name type' strings."""
        adds, widens = _pairs("add", add), _pairs("widen", widen)
        drops = [naming.check_name("column", n.strip() if isinstance(n, str) else n) for n in drop]
        if not (adds or drops or widens):
            raise InvalidArgument("nothing to change: give a column to add ('c string'), drop ('c') or widen ('c bigint')")
        touched = [n.lower() for n, _ in adds] + [n.lower() for n in drops] + [n.lower() for n, _ in widens]
        twice = sorted({n for n in touched if touched.count(n) > 1})
        if twice:
            raise InvalidArgument(f"column {twice[0]!r} is changed twice in one alter: change it once per alter")

        def run(s: Session) -> TableView:
            t = table_row(s, ref, db)
            label = table_view(s, t).qualified_name
            cols = [list(c) for c in t.columns]
            index = {n.lower(): i for i, (n, _) in enumerate(cols)}
            keys = {c.lower(): "distribution" for c in t.dist_cols} | {c.lower(): "partition" for c in t.partition_cols}
            change: list[dict] = []

            def data_column(name: str, verb: str, refused: str, why: str) -> None:
                """Refuse a change of a column that is missing, or that the group schema fixes."""
                if name.lower() not in index:
                    raise InvalidArgument(f"cannot {verb} column {name!r} of {label}: it has no such column "
                                          f"(its columns: {', '.join(n for n, _ in cols)})")
                if name.lower() in keys:
                    raise SchemaMismatch(f"cannot {refused} column {name!r} of {label}: it is a {keys[name.lower()]} "
                                         f"column, which the colocation group schema fixes {why}")

            for name in drops:
                data_column(name, "drop", "drop", "(rows are placed by it); create a new table to change it")
            for name, typ in widens:
                data_column(name, "widen", "change the type of", "(its type decides each row's bucket or directory)")
                old = cols[index[name.lower()]][1]
                why = widening(old, typ)
                if why is not None:
                    raise InvalidArgument(f"cannot widen column {name!r} of {label} from {old} to {typ}: {why}; "
                                          f"the lossless widenings are {'; '.join(WIDENINGS)}")
            past = _history_names(s, t.id) - set(index)
            for name, typ in adds:
                if name.lower() in index:
                    raise InvalidArgument(f"cannot add column {name!r} to {label}: the column exists "
                                          f"({cols[index[name.lower()]][0]} {cols[index[name.lower()]][1]}); "
                                          f"widen it with --widen-column or choose another name")
                if name.lower() == RESERVED:
                    raise InvalidArgument(f"cannot add column {name!r} to {label}: the name is reserved for the bucket column")
                if name.lower() in past:
                    raise InvalidArgument(f"cannot add column {name!r} to {label}: a column of that name was dropped "
                                          f"before, and files written then still hold its old values, which would "
                                          f"reappear; choose another name")
            left = [n for n, _ in cols if n.lower() not in keys and n.lower() not in {d.lower() for d in drops}]
            if drops and not left and not adds:
                raise InvalidArgument(f"cannot drop {', '.join(drops)} of {label}: it is the last data column (every "
                                      f"other column is a distribution or partition column); add another column first")
            for name in drops:
                old = cols[index[name.lower()]]
                change.append({"op": "drop", "column": old[0], "old": old[1]})
            for name, typ in widens:
                old = cols[index[name.lower()]]
                change.append({"op": "widen", "column": old[0], "old": old[1], "type": typ})
                old[1] = typ
            dropped = {d.lower() for d in drops}
            cols = [c for c in cols if c[0].lower() not in dropped]
            for name, typ in adds:
                cols.append([name, typ])
                change.append({"op": "add", "column": name, "type": typ})
            if t.schema_version is None:
                t.schema_version = 1
            if s.get(m.TableSchema, (t.id, t.schema_version)) is None:  # a table from before 0005's backfill
                record_version(s, t, None, utc(t.created_at))
            t.columns = cols
            t.schema_version += 1
            record_version(s, t, change, self.db.now())
            self.db.event(s, "table.alter_schema", label, id=t.id, schema_version=t.schema_version, change=change)
            return table_view(s, t)

        return self.db.tx(run)

    def history(self, ref: str | int, *, db: str | None = None) -> list[SchemaVersionView]:
        def run(s: Session) -> list[SchemaVersionView]:
            t = table_row(s, ref, db)
            return [SchemaVersionView(table_id=r.table_id, version=r.version, columns=tuple(tuple(c) for c in r.columns),
                                      change=tuple(r.change or ()), created_at=utc(r.created_at))
                    for r in s.scalars(select(m.TableSchema).where(m.TableSchema.table_id == t.id)
                                       .order_by(m.TableSchema.version))]

        return self.db.tx(run)
