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


def test_a_task_and_a_notebook_refuse_a_table_that_differs_alike(sqlite_catalog, tmp_path):
    """The write operator and ``write_in_session`` take the table through one ``ensure_table``: a
    table the caller describes differently from the catalog stops both, naming every difference,
    before anything is planned (no write job, no Spark: ``spark`` is never touched here)."""
    from colocate_testing import add_local_backends

    from airflow_colocate.core.contract import Source
    from airflow_colocate.core.errors import SchemaMismatch
    from airflow_colocate.jobs.write import TableSpec, write_in_session

    add_local_backends(sqlite_catalog, tmp_path / "backends", n=2)
    op = ColocateWriteOperator(task_id="w", table="events", source="/x", columns="k bigint, dt date", dist_cols=["k"],
                               bucket_num=4, partition_col="dt")
    ensure_table(sqlite_catalog, op.table, op.table_spec())
    differing = TableSpec("k bigint, dt date", ["k"], 8, replication_num=2, partition_col="dt")
    with pytest.raises(SchemaMismatch, match=r"bucket count is 4 in the catalog, 8 in the task; replication_num is 1"):
        ensure_table(sqlite_catalog, "events", differing)
    with pytest.raises(SchemaMismatch, match=r"bucket count is 4 in the catalog, 8 in the task"):
        write_in_session(None, sqlite_catalog, "events", "2026-11-01", Source(format="parquet", path="/x"), spec=differing)
    assert sqlite_catalog.jobs.list() == []


def test_a_task_naming_the_tables_group_by_its_short_name_matches_and_another_group_is_named_in_full(sqlite_catalog, tmp_path):
    """A task's ``colocate_with`` is the short name; the catalog shows the full name ``dbId_name``:
    the same group is no difference, another one is named in full on both sides."""
    from colocate_testing import add_local_backends

    from airflow_colocate.core.errors import SchemaMismatch
    from airflow_colocate.jobs.write import TableSpec

    add_local_backends(sqlite_catalog, tmp_path / "backends", n=2)
    spec = TableSpec("k bigint, dt date", ["k"], 4, partition_col="dt", colocate_with="g_events")
    ensure_table(sqlite_catalog, "events", spec)
    ensure_table(sqlite_catalog, "events", spec)  # again: the same group, nothing differs
    other = TableSpec("k bigint, dt date", ["k"], 4, partition_col="dt", colocate_with="g_other")
    with pytest.raises(SchemaMismatch, match=r"colocation group is '1_g_events' in the catalog, '1_g_other' in the task"):
        ensure_table(sqlite_catalog, "events", other)
    plain = TableSpec("k bigint, dt date", ["k"], 4, partition_col="dt")
    with pytest.raises(SchemaMismatch, match=r"colocation group is '1_g_events' in the catalog, None in the task"):
        ensure_table(sqlite_catalog, "events", plain)
