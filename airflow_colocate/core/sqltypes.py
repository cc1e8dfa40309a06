"""Spark SQL column types as the catalog stores and compares them.

The colocation group schema compares distribution-column *types*, so two spellings of one type
(``long`` and ``bigint``) must compare equal and a typo must be refused at create time.
"""

from __future__ import annotations

import re

from airflow_colocate.core.errors import InvalidArgument

_ALIASES = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "bool": "boolean",
    "real": "float",
    "varchar": "string",
    "text": "string",
    "timestamp_ltz": "timestamp",
}
_SIMPLE = {
    "tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "string", "binary",
    "date", "timestamp", "timestamp_ntz",
}
_DECIMAL = re.compile(r"(?:decimal|dec|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?")
_CHAR = re.compile(r"(?:char|varchar)\s*\(\s*\d+\s*\)")


def normalize_type(type_name: object) -> str:
    """Canonical lower-case Spark SQL type name; raises on anything we cannot bucket or store."""
    if not isinstance(type_name, str) or not type_name.strip():
        raise InvalidArgument(f"invalid column type {type_name!r}: expected a Spark SQL type such as 'bigint'")
    t = " ".join(type_name.strip().lower().split())
    if _CHAR.fullmatch(t):
        return "string"
    t = _ALIASES.get(t, t)
    if t in _SIMPLE:
        return t
    m = _DECIMAL.fullmatch(t)
    if m:
        precision = int(m.group(1) or 10)
        scale = int(m.group(2) or 0)
        if not (1 <= precision <= 38 and 0 <= scale <= precision):
            raise InvalidArgument(f"invalid column type {type_name!r}: decimal needs 1 <= precision <= 38 and 0 <= scale <= precision")
        return f"decimal({precision},{scale})"
    raise InvalidArgument(
        f"unsupported column type {type_name!r}: use a Spark SQL primitive type "
        f"(tinyint, smallint, int, bigint, float, double, decimal(p,s), boolean, string, binary, date, timestamp, timestamp_ntz)"
    )


def parse_columns(spec: str) -> list[tuple[str, str]]:
    """Parse ``"id bigint, name string, price decimal(15,2)"`` into (name, type) pairs."""
    from airflow_colocate.core.naming import check_name

    cols: list[tuple[str, str]] = []
    depth = 0
    current = ""
    parts: list[str] = []
    for ch in spec:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    for part in parts:
        words = part.strip().split(None, 1)
        if len(words) != 2:
            raise InvalidArgument(f"invalid column definition {part.strip()!r}: expected 'name type', e.g. 'o_orderkey bigint'")
        cols.append((check_name("column", words[0]), normalize_type(words[1])))
    return cols


# ---------------------------------------------------------------------- widening

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_CANONICAL_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def comparable_type(type_name: str) -> str:
    """:func:`normalize_type`, or for a type the catalog does not store (``array<int>``, a struct) its
    lower-case spelling: a source may hold such a column, and the write must still name it in its error."""
    try:
        return normalize_type(type_name)
    except InvalidArgument:
        return " ".join(type_name.strip().lower().split())


def _decimal(t: str) -> tuple[int, int] | None:
    m = _CANONICAL_DECIMAL.fullmatch(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def widening_ok(source_type: str, table_type: str) -> bool:
    """Whether a ``source_type`` column may be written into a ``table_type`` column.

    The write casts the source to the table's types before hashing, so bucket ids are always those of
    the table type; what must not happen is a cast that silently changes values. So only: equal
    types, tinyint < smallint < int < bigint, float < double, an integral type into a decimal with
    enough integer digits, decimal(p,s) into decimal(p2,s2) with s2 >= s and p2-s2 >= p-s, date into
    timestamp (and void, an all-NULL column, into anything). Exact numbers never become approximate
    ones (int into double), and nothing becomes a string.
    """
    src, dst = comparable_type(source_type), comparable_type(table_type)
    if src == dst or src == "void":
        return True
    if src in _INTEGRAL and dst in _INTEGRAL:
        return _INTEGRAL.index(src) <= _INTEGRAL.index(dst)
    if src == "float" and dst == "double":
        return True
    dst_dec = _decimal(dst)
    if src in _INTEGRAL and dst_dec:
        precision, scale = dst_dec
        return precision - scale >= _INTEGRAL_DIGITS[src]
    src_dec = _decimal(src)
    if src_dec and dst_dec:
        (p, s), (p2, s2) = src_dec, dst_dec
        return s2 >= s and p2 - s2 >= p - s
    if src == "date" and dst in ("timestamp", "timestamp_ntz"):
        return True
    return False
