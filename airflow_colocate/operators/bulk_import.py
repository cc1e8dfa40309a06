"""``ColocateImportOperator``: bring a Hive-style partitioned dataset into a table with one Spark job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_colocate.core.contract import ImportReport
from airflow_colocate.jobs import metrics
from airflow_colocate.jobs.bulk_import import prepare_import, run_import
from airflow_colocate.jobs.iceberg import check_iceberg_args, ensure_published, publish
from airflow_colocate.operators.base import ColocateSparkOperator
from airflow_colocate.operators.links import ColocationLink


class ColocateImportOperator(ColocateSparkOperator):
    """Import every ``<partition column>=<value>`` folder of ``source`` into ``table`` (which must
    exist, partitioned by that column) with one spark-submit of ``spark/import_job.py``: one read,
    one bucketing, every bucket of every partition placed and replicated with checksum-verified
    copies. Each placed partition is committed in its own catalog transaction; a partition whose
    files fail verification is not, and the summary (XCom) says which. A failed or killed job
    still commits the partitions it finished; a re-run skips partitions already imported from the
    same files and imports the rest.

    :param table: ``table`` or ``db.table``.
    :param source: the dataset root (templated), e.g. ``/landing/orders`` holding ``dt=2026-11-01/…``.
    :param source_format: ``parquet`` or ``orc``.
    :param partitions: only these partition values (templated); default every folder.
    :param iceberg: True publishes the table as an Iceberg table from this import on (under
        ``iceberg_warehouse``, templated, or ``COLOCATE_ICEBERG_WAREHOUSE``), False stops; None leaves it.
    """

    job_kind = "import"
    report_type = ImportReport
    template_fields: Sequence[str] = (*ColocateSparkOperator.template_fields, "table", "source", "partitions",
                                          "iceberg_warehouse")
    ui_color = "#d8ecf3"
    operator_extra_links = (ColocationLink(),)

    def __init__(self, *, table: str, source: str, source_format: str = "parquet",
                 partitions: Sequence[str] | None = None, iceberg: bool | None = None,
                 iceberg_warehouse: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("name", f"colocate-import-{table}")
        super().__init__(**kwargs)
        self.table = table
        self.source = source
        self.source_format = source_format
        self.partitions = partitions
        self.iceberg, self.iceberg_warehouse = iceberg, iceberg_warehouse
        check_iceberg_args(iceberg, iceberg_warehouse)  # before the task runs: a DAG that cannot work fails to load

    def execute(self, context) -> dict:
        catalog = self.catalog
        echo = self.log.info
        job = prepare_import(catalog, self.table, self.source, fmt=self.source_format,
                             partitions=list(self.partitions) if self.partitions else None,
                             work_dir=self.work_dir, echo=echo)
        turned_on = ensure_published(catalog, self.table, self.iceberg, warehouse=self.iceberg_warehouse)
        summary = run_import(catalog, job, lambda plan: self.run_job(context, plan), echo=echo)
        if turned_on:  # each commit published what it changed; this names the partitions imported before
            for line in (o.line() for o in publish(catalog, self.table)):
                self.log.info("colocate: %s", line)
        metrics.imported(summary)
        return summary


__all__ = ["ColocateImportOperator"]
