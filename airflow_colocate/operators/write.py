"""``ColocateWriteOperator``: load one partition of a table into its colocation group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset

from airflow_colocate.core.contract import WriteReport
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs import metrics
from airflow_colocate.jobs.write import TableSpec, check_schema_evolution, ensure_table, finish_write, prepare_write, source_of
from airflow_colocate.operators.base import ColocateSparkOperator, backend_names
from airflow_colocate.operators.links import ColocationLink
from airflow_colocate.operators.log_summary import Phases, write_lines
from airflow_colocate.operators.spark_ui import SparkHistoryLink


def table_asset(table: str) -> Asset:
    """The Asset a write updates, so a DAG can be scheduled on a table's new partitions."""
    db, _, name = table.rpartition(".")
    return Asset(uri=f"colocate://{db or 'default'}/{name}", name=f"colocate.{db or 'default'}.{name}")


class ColocateWriteOperator(ColocateSparkOperator):
    """Plan the write in the catalog, run the Spark write job, check its report and commit the new
    partition version in one transaction. A failed or killed job leaves the previous version
    visible; ``colocate gc`` removes its leftovers.

    :param table: ``table`` or ``db.table``; created on first use from ``columns``,
        ``dist_cols``, ``bucket_num``, ``replication_num``, ``partition_col`` and ``colocate_with``.
    :param source: a path (parquet/csv/json/orc, see ``source_format``) or None with ``source_query``.
    :param source_query: Spark SQL over catalog tables named in ``source_tables``
        (``{"orders": ["2026-11-01"]}``; a list of partitions, or None for every committed one).
    :param partition: the partition value, templated (``{{ ds }}``); ``all`` for unpartitioned tables.
    :param mode: ``overwrite`` (a re-run or backfill replaces the partition) or ``append``.
    :param schema_evolution: None (a source column the table lacks fails the task, naming the
        ``colocate table alter`` that would accept it) or ``"add_columns"`` (it becomes a new schema
        version of the table when the write commits; older partitions read it as null).
    :param retention_days: when given, the table's retention is set to it (partitions dated older
        are dropped by the maintenance DAG); None leaves the table's retention as it is.
    :param iceberg: True publishes the table as an Iceberg table from this commit on (under
        ``iceberg_warehouse``, templated, or ``COLOCATE_ICEBERG_WAREHOUSE``), False stops; None leaves it.
    """

    job_kind = "write"
    report_type = WriteReport
    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "table",
        "source",
        "source_options",
        "source_query",
        "source_tables",
        "partition",
        "colocate_with",
        "mode",
        "schema_evolution",
        "iceberg_warehouse",
    )
    template_fields_renderers = {**getattr(SparkSubmitOperator, "template_fields_renderers", {}), "source_query": "sql"}
    ui_color = "#d8ecf3"
    operator_extra_links = (ColocationLink(), SparkHistoryLink())

    def __init__(self, *, table: str, partition: str = "all", source: str | None = None,
                 source_format: str = "parquet", source_options: dict[str, str] | None = None,
                 source_query: str | None = None, source_tables: dict[str, list[str] | None] | None = None,
                 columns: str | Sequence[tuple[str, str]] | None = None, dist_cols: Sequence[str] | None = None,
                 bucket_num: int | None = None, replication_num: int = 1, partition_col: str | None = None,
                 colocate_with: str | None = None, mode: str = "overwrite", schema_evolution: str | None = None,
                 retention_days: int | None = None, iceberg: bool | None = None, iceberg_warehouse: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("name", f"colocate-write-{table}")
        kwargs.setdefault("outlets", [table_asset(table)])
        super().__init__(**kwargs)
        self.table = table
        self.partition = partition
        self.source = source
        self.source_format = source_format
        self.source_options = source_options or {}
        self.source_query = source_query
        self.source_tables = source_tables or {}
        self.columns = columns
        self.dist_cols = dist_cols
        self.bucket_num = bucket_num
        self.replication_num = replication_num
        self.partition_col = partition_col
        self.colocate_with = colocate_with
        self.mode = mode
        self.schema_evolution = schema_evolution
        self.retention_days = retention_days
        self.iceberg, self.iceberg_warehouse = iceberg, iceberg_warehouse
        if not isinstance(schema_evolution, str) or "{{" not in schema_evolution:
            check_schema_evolution(schema_evolution)

    def table_spec(self) -> TableSpec | None:
        """The table this task describes (None: it must exist already)."""
        if self.columns is None:
            return None
        return TableSpec(self.columns, list(self.dist_cols or []), self.bucket_num, self.replication_num,
                         self.partition_col, self.colocate_with)

    def execute(self, context) -> dict:
        phases = Phases()
        with phases("plan"):
            catalog = self.catalog
            ensure_table(catalog, self.table, self.table_spec(), retention_days=self.retention_days,
                         iceberg=self.iceberg, iceberg_warehouse=self.iceberg_warehouse)
            source = source_of(catalog, path=self.source, fmt=self.source_format, options=self.source_options,
                               query=self.source_query, tables=self.source_tables)
            ticket, plan = prepare_write(catalog, self.table, self.partition, source, mode=self.mode,
                                         work_dir=self.work_dir, schema_evolution=self.schema_evolution)
        self.log.info("colocate: write job %s: %s partition %s -> version %s (%s, %d buckets)", ticket.job_id,
                      ticket.table.qualified_name, ticket.partition_value, ticket.version, ticket.mode, len(ticket.targets))
        if ticket.missing:
            self.log.warning("colocate: backends not alive, these replicas will be repaired later: %s", "; ".join(ticket.missing))
        with phases("spark job"):
            report = self.run_job(context, plan, on_failure=lambda exc: catalog.writes.abort(
                ticket.job_id, f"{type(exc).__name__}: {exc}"))
        with phases("commit"):
            summary = finish_write(catalog, ticket, report)
        metrics.write_committed(summary)
        summary["elapsed"] = {name: round(seconds, 2) for name, seconds in phases.seconds.items()}
        summary["spark_ui"] = self.spark_ui()
        outlet_events = context.get("outlet_events") if hasattr(context, "get") else None
        if outlet_events is not None:
            try:
                outlet_events[table_asset(self.table)].extra = {
                    "partition": ticket.partition_value, "version": summary["version"], "rows": summary["rows"]}
            except Exception as exc:  # an asset event is a convenience, never a reason to fail a committed write
                self.log.warning("colocate: could not attach asset event extra: %s", exc)
        self._committed = summary
        self.log_summary([*write_lines(summary, backend_names(catalog)),
                          *([f"Spark UI: {summary['spark_ui']}"] if summary["spark_ui"] else []), phases.line()])
        return summary

    def get_openlineage_facets_on_complete(self, task_instance):
        """OpenLineage (when Airflow's provider is installed): the source in, the committed table
        out with rows and bytes (operators/lineage.py)."""
        from airflow_colocate.operators.lineage import write_lineage

        return write_lineage(getattr(self, "_committed", None), source=self.source,
                             source_tables=list(self.source_tables))


__all__ = ["ColocateWriteOperator", "ColocateError", "table_asset"]
