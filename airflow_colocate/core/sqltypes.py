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
