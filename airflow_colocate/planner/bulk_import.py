"""The bulk-import plan and report: many partitions of one table loaded by one Spark job. Pure.

An import is one :class:`~airflow_colocate.planner.contract.WritePlan` per partition (each its own
new version, planned in the catalog like any write) plus what the one Spark job needs to read them
all at once: the dataset root and the partition folders. The job reports each partition on its own
(a :class:`WriteReport`, or the reason it failed), so the control plane commits every partition
whose files were placed and verified and leaves the others uncommitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_colocate.planner.contract import JsonMixin, WritePlan, WriteReport


@dataclass
class ImportPartition:
    value: str  # the partition value, as the catalog names it
    folder: str  # URI of its source folder, e.g. file:///landing/orders/dt=2026-11-01
    plan: WritePlan


@dataclass
class ImportPlan(JsonMixin):
    job_id: str
    table: str  # db.table, for messages
    root: str  # the dataset root holding the <partition column>=<value> folders
    format: str  # parquet | orc
    partition_col: str
    partitions: list[ImportPartition]
    staging_uri: str  # Spark's raw output for every partition, removed by the job when done
    report_uri: str  # the ImportReport; each placed partition also gets <report dir>/parts/<n>.json
    kind: str = "import"

    def part_report_uri(self, index: int) -> str:
        """Where the job writes partition ``index``'s report as soon as it is placed, so a killed
        job's finished partitions can still be committed."""
        return f"{self.report_uri.rsplit('/', 1)[0]}/parts/{index:06d}.json"


@dataclass
class ImportReport(JsonMixin):
    job_id: str
    table: str
    reports: list[WriteReport]  # the partitions placed and verified, in plan order
    failed: dict[str, str] = field(default_factory=dict)  # partition value -> why it was not placed
    seconds: float = 0.0
    spark_version: str = ""
    kind: str = "import"


def import_plan(job_id: str, table: str, root: str, fmt: str, partition_col: str,
                partitions: list[ImportPartition], staging_uri: str, work_uri: str) -> ImportPlan:
    """The import plan; the partitions' own staging directories are unused (the job stages all of
    them under one directory, one ``<col>=<value>`` folder each)."""
    return ImportPlan(job_id=job_id, table=table, root=root, format=fmt, partition_col=partition_col,
                      partitions=partitions, staging_uri=staging_uri,
                      report_uri=f"{work_uri.rstrip('/')}/{job_id}/report.json")
