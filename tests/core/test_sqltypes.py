"""The type rules: canonical spellings, and which source types a write may widen into a table's."""

from __future__ import annotations

import pytest

from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.sqltypes import (
    comparable_type,
    normalize_type,
    parse_columns,
    widening_ok,
)

SAFE_WIDENINGS = [
    ("bigint", "bigint"), ("long", "bigint"), ("tinyint", "smallint"), ("tinyint", "bigint"),
    ("int", "bigint"), ("float", "double"), ("int", "decimal(10,0)"), ("bigint", "decimal(21,2)"),
    ("tinyint", "decimal(3,0)"), ("decimal(9,1)", "decimal(12,2)"), ("decimal(5,2)", "decimal(5,2)"),
    ("date", "timestamp"), ("void", "string"),
]
REFUSED = [
    ("bigint", "int"), ("double", "float"), ("double", "bigint"), ("int", "decimal(9,0)"),
    ("bigint", "decimal(20,2)"), ("decimal(12,2)", "decimal(12,3)"), ("decimal(12,2)", "decimal(11,2)"),
    ("int", "string"), ("date", "string"), ("string", "int"), ("timestamp", "date"), ("int", "double"),
    ("array<int>", "string"),
]


@pytest.mark.parametrize("src, dst", SAFE_WIDENINGS)
def test_safe_widenings(src, dst):
    assert widening_ok(src, dst)


@pytest.mark.parametrize("src, dst", REFUSED)
def test_refused_conversions(src, dst):
    assert not widening_ok(src, dst)


@pytest.mark.parametrize("src, dst", [
    ("INTEGER", "bigint"), ("short", "int"), ("byte", "smallint"), ("decimal", "decimal(12,2)"),
    ("numeric(5, 1)", "decimal(6,1)"), ("date", "timestamp_ntz"), ("real", "double"),
])
def test_widening_sees_through_spellings(src, dst):
    """Spark's schema says ``int`` where a user wrote ``integer``: the rule compares canonical types."""
    assert widening_ok(src, dst)


def test_widening_never_crosses_into_a_smaller_decimal_part():
    assert widening_ok("decimal(10,2)", "decimal(11,3)")
    assert not widening_ok("decimal(10,2)", "decimal(10,3)")  # one integer digit less
    assert not widening_ok("decimal(10,2)", "decimal(11,1)")  # one fractional digit less
    assert not widening_ok("smallint", "decimal(6,2)")  # 32767 needs 5 integer digits, 4 are left


def test_comparable_type_keeps_types_the_catalog_does_not_store():
    assert comparable_type("LONG") == "bigint"
    assert comparable_type(" Decimal( 12 , 2 ) ") == "decimal(12,2)"
    assert comparable_type("ARRAY<INT>") == "array<int>"
    assert comparable_type("struct<a: int,  b: string>") == "struct<a: int, b: string>"
    assert widening_ok("ARRAY<INT>", "array<int>")  # equal after normalisation


def test_normalize_type_and_parse_columns():
    assert normalize_type("varchar(20)") == "string"
    assert normalize_type("dec") == "decimal(10,0)"
    with pytest.raises(InvalidArgument, match="decimal needs 1 <= precision <= 38"):
        normalize_type("decimal(40,2)")
    with pytest.raises(InvalidArgument, match="unsupported column type 'map<int,int>'"):
        normalize_type("map<int,int>")
    assert parse_columns("id bigint, price decimal(15, 2), d date") == [
        ("id", "bigint"), ("price", "decimal(15,2)"), ("d", "date")]
    with pytest.raises(InvalidArgument, match="expected 'name type'"):
        parse_columns("id")
