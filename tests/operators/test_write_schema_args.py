"""ColocateWriteOperator's issue-28 arguments without Spark: schema_evolution is checked when the
DAG is parsed, retention_days reaches the table at create and is applied to an existing one."""

from __future__ import annotations

import pytest

from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.jobs.write import ensure_table
from airflow_colocate.operators.write import ColocateWriteOperator


def test_schema_evolution_is_checked_at_parse_time():
    with pytest.raises(InvalidArgument, match="invalid schema_evolution 'add_column'.*'add_columns'"):
        ColocateWriteOperator(task_id="w", table="t", source="/x", schema_evolution="add_column")
    assert ColocateWriteOperator(task_id="w", table="t", source="/x", schema_evolution="add_columns").schema_evolution
    ColocateWriteOperator(task_id="w", table="t", source="/x", schema_evolution="{{ params.evolve }}")  # templated


def test_retention_days_at_create(sqlite_catalog, tmp_path):
    from colocate_testing import add_local_backends

    add_local_backends(sqlite_catalog, tmp_path / "backends", n=1)
    op = ColocateWriteOperator(task_id="w", table="events", source="/x", columns="k bigint, dt date", dist_cols=["k"],
                               bucket_num=2, partition_col="dt", retention_days=30)
    ensure_table(sqlite_catalog, op.table, op.table_spec(), retention_days=op.retention_days)
    assert sqlite_catalog.tables.get("events").retention_days == 30
