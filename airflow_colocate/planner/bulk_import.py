"""The bulk-import plan: many partitions of one table loaded by one Spark job. Pure.

The plan and report dataclasses are :class:`~airflow_colocate.core.contract.ImportPlan` and
:class:`~airflow_colocate.core.contract.ImportReport`; this builds the plan from the partitions the
catalog planned, so the report location follows the same ``<work dir>/<job id>/`` rule as every job.
"""

from __future__ import annotations

from airflow_colocate.core.contract import ImportPartition, ImportPlan


def import_plan(job_id: str, table: str, root: str, fmt: str, partition_col: str,
                partitions: list[ImportPartition], staging_uri: str, work_uri: str) -> ImportPlan:
    """The import plan; the partitions' own staging directories are unused (the job stages all of
    them under one directory, one ``<col>=<value>`` folder each)."""
    return ImportPlan(job_id=job_id, table=table, root=root, format=fmt, partition_col=partition_col,
                      partitions=partitions, staging_uri=staging_uri,
                      report_uri=f"{work_uri.rstrip('/')}/{job_id}/report.json")
