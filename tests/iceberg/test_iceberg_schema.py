"""Our schema versions as Iceberg's: which widenings Iceberg reads from old files, ids replayed in
order, our partition values as identity partition values. Pure: no Spark, no database."""

from __future__ import annotations

import pytest

from airflow_colocate.iceberg.schema import NotPublishable, Step, first_schema, partition_value, steps


def test_a_widening_iceberg_cannot_read_from_old_files_is_refused_with_why():
    with pytest.raises(NotPublishable, match=r"'d' was widened date -> timestamp_ntz, which Iceberg cannot read"):
        steps([[{"op": "widen", "column": "d", "type": "timestamp_ntz", "old": "date"}]])


def test_changes_replay_in_order_and_narrow_ints_are_one_iceberg_int():
    got = steps([[{"op": "add", "column": "q", "type": "tinyint"}],
                 [{"op": "widen", "column": "q", "type": "int", "old": "tinyint"}],  # int all along: no step
                 [{"op": "widen", "column": "q", "type": "bigint", "old": "int"},
                  {"op": "drop", "column": "v"}],
                 [{"op": "widen", "column": "p", "type": "decimal(14,2)", "old": "decimal(10,2)"}]])
    assert got == [Step("add", "q", "tinyint"), Step("widen", "q", "bigint"), Step("drop", "v", ""),
                   Step("widen", "p", "decimal(14,2)")]
    schema = first_schema([("id", "bigint"), ("v", "string"), ("dt", "date"), ("p", "decimal(10,2)")])
    assert [(f.field_id, f.name, str(f.field_type)) for f in schema.fields] == [
        (1, "id", "long"), (2, "v", "string"), (3, "dt", "date"), (4, "p", "decimal(10, 2)")]


def test_partition_values_as_identity_values():
    assert partition_value("date", "1970-01-02") == 1
    assert partition_value("int", "42") == 42 and partition_value("string", "all") == "all"
    with pytest.raises(NotPublishable, match="partition value '2026-13-01' is not a date"):
        partition_value("date", "2026-13-01")
    with pytest.raises(NotPublishable, match="a partition column of type double is not published"):
        partition_value("double", "1.5")
