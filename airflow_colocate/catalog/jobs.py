"""The one reader of jobs of every kind: writes, balance jobs (relocate, balance, repair) and gc.
Writers of jobs stay with their concern (``writes``, ``balance_jobs``); everything that lists or
shows a job reads it here, as a :class:`JobView`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.rows import group_view, table_view
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.model.views import JobView
from airflow_colocate.core.errors import NotFound
from airflow_colocate.core.times import utc

DEFAULT_LIMIT = 100


def job_view(s: Session, job: m.Job) -> JobView:
    g = s.get(m.ColocateGroup, job.group_id) if job.group_id is not None else None
    view = group_view(s, g) if g is not None else None
    plan = job.plan or {}
    subject = None
    if job.kind == "write" and plan.get("partition_id") is not None:
        p = s.get(m.Partition, plan["partition_id"])
        t = s.get(m.Table, p.table_id) if p is not None else None
        if p is not None and t is not None:
            subject = f"{table_view(s, t).qualified_name}/{p.value} v{plan.get('version')}"
    progress = job.progress or {}
    return JobView(id=job.id, kind=job.kind, state=job.state, grp_id=job.group_id,
                   group=view.full_name if view else plan.get("group", "") or "",
                   step=progress.get("step", ""), plan=plan, progress=progress,
                   created_at=utc(job.created_at), updated_at=utc(job.updated_at),
                   group_id=view.group_id if view else None, subject=subject)


class Jobs:
    """Jobs of every kind, newest first."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def get(self, job_id: int) -> JobView:
        def run(s: Session) -> JobView:
            j = s.get(m.Job, job_id)
            if j is None:
                raise NotFound(f"unknown job {job_id}: 'colocate jobs list' shows the jobs")
            return job_view(s, j)

        return self.db.tx(run)

    def list(self, *, kinds: Sequence[str] | None = None, states: Sequence[str] | None = None,
             limit: int = DEFAULT_LIMIT) -> list[JobView]:
        """Newest first; ``kinds`` and ``states`` filter (None or empty: all)."""
        def run(s: Session) -> list[JobView]:
            q = select(m.Job).order_by(m.Job.id.desc()).limit(max(0, int(limit)))
            if kinds:
                q = q.where(m.Job.kind.in_(list(kinds)))
            if states:
                q = q.where(m.Job.state.in_(list(states)))
            return [job_view(s, j) for j in s.scalars(q)]

        return self.db.tx(run)
