"""One table, backend or job of the Colocation page in its own view (``?table=``, ``?backend=``,
``?job=``): a table's partitions with their visible versions, its schema history and its recycle
bin; a backend's replicas, state and probe history (its state changes, who made them, the last
probe); a job's progress and the task (and so the DAG run) that started it."""

from __future__ import annotations

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.errors import NotFound
from airflow_colocate.plugins.presenters import job_model, table_detail

HISTORY = 20  # state changes and job events shown
EVENTS_SCANNED = 2000  # events read to find a backend's or a job's


def table_view(catalog: Catalog, ref: str) -> dict:
    out = table_detail(catalog, ref)
    out["partitions"] = [{"value": p.value, "version": p.visible_version}
                         for p in catalog.partitions.list(out["id"])]
    return {"kind": "table", "title": f"table {out['table']}", **out}


def backend_view(catalog: Catalog, ref: str, load: list[dict]) -> dict:
    b = catalog.backends.get(ref)
    row = next((r for r in load if r["id"] == b.id), {})
    history = [e for e in catalog.events(limit=EVENTS_SCANNED) if e.subject == b.name and e.kind.startswith("backend.")]
    return {"kind": "backend", "title": f"backend {b.name}", "backend": b, "replicas": row.get("replicas", 0),
            "bytes": row.get("bytes", 0), "history": history[:HISTORY]}


def job_view(catalog: Catalog, job_id: int) -> dict:
    j = catalog.jobs.get(job_id)
    events = [e for e in catalog.events(limit=EVENTS_SCANNED) if (e.detail or {}).get("job_id") == j.id]
    started_by = events[-1].actor if events else None  # the oldest event of the job: who planned it
    return {"kind": "job", "title": f"job {j.id} ({j.kind})", "job": job_model(j), "progress": j.progress or {},
            "history": events[:HISTORY], "started_by": started_by}


def detail_of(catalog: Catalog, *, table: str | None, backend: str | None, job: int | None,
              load: list[dict]) -> tuple[dict | None, str | None]:
    """(the view, None), or (None, why not) for a name that does not exist; (None, None) when none asked."""
    try:
        if table:
            return table_view(catalog, table), None
        if backend:
            return backend_view(catalog, backend, load), None
        if job is not None:
            return job_view(catalog, job), None
    except NotFound as exc:
        return None, str(exc)
    return None, None


__all__ = ["detail_of"]
