"""``ColocateVerifyOperator``: prove replicas to the byte and to the row with the Spark verify job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_colocate.core.contract import VerifyReport
from airflow_colocate.jobs.verify import plan_verify, verify
from airflow_colocate.operators.base import ColocateSparkOperator
from airflow_colocate.operators.links import ColocationLink


class ColocateVerifyOperator(ColocateSparkOperator):
    """Re-hash every replica's files and re-compute every row's bucket (``spark/verify_job.py``
    through spark-submit); mark the replicas that fail ``bad`` and their groups unstable with the
    reason, so no read chooses them and the next :class:`ColocateBalanceOperator` repairs them from
    a good replica. The summary (bad replicas, groups) goes to the log and XCom.

    :param group: one group (name, ``dbId_name`` or ``dbId.grpId``); default every group.
    :param table: one table of a group.
    :param limit: at most this many replicas, the least recently verified first.
    :param dry_run: only say what would be verified; change nothing.
    """

    job_kind = "verify"
    report_type = VerifyReport
    template_fields: Sequence[str] = (*ColocateSparkOperator.template_fields, "group", "table", "limit", "dry_run")
    ui_color = "#e3ecf7"
    operator_extra_links = (ColocationLink(),)

    def __init__(self, *, group: str | None = None, table: str | None = None, limit: int | None = None,
                 dry_run: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("name", f"colocate-verify-{kwargs.get('task_id', 'verify')}")
        super().__init__(**kwargs)
        self.group = group
        self.table = table
        self.limit = limit
        self.dry_run = dry_run

    def execute(self, context) -> dict:
        limit = None if self.limit in (None, "", "None") else int(self.limit)
        scope = dict(group=_given(self.group), table=_given(self.table), limit=limit)
        if str(self.dry_run).strip().lower() in ("1", "true", "yes", "on"):
            plan, targets = plan_verify(self.catalog, **scope, work_dir=self.work_dir)
            size = sum(t.bytes for t in targets.values())
            self.log.info("colocate: dry run: would verify %d replicas of %d tables (%d bytes)", len(targets),
                          len(plan.tables), size)
            return {"dry_run": True, "replicas": len(targets), "bytes": size, "tables": [t.table for t in plan.tables]}
        return verify(self.catalog, lambda plan: self.run_job(context, plan), **scope, work_dir=self.work_dir,
                      echo=lambda line: self.log.info("colocate: %s", line))


def _given(value) -> str | None:
    """A template that rendered to nothing (``''``, ``None``) means: not given."""
    return None if value in (None, "", "None", "null") else str(value)


__all__ = ["ColocateVerifyOperator"]
