"""Catalog views as the admin API answers them and the Colocation page shows them.

Plain dicts in the shape of :mod:`.schemas`' response models, so the JSON a client reads and the
numbers the page draws come from one function each and cannot drift apart.
"""

from __future__ import annotations

from airflow_colocate.catalog import Catalog
from airflow_colocate.model.views import BackendView, EventView, GroupView, JobView
from airflow_colocate.core.errors import ColocateError


def table_names(catalog: Catalog) -> dict[int, str]:
    return {t.id: t.qualified_name for t in catalog.tables.list()}


def group_model(g: GroupView, names: dict[int, str]) -> dict:
    return {"group_id": g.group_id, "db_id": g.db_id, "grp_id": g.grp_id, "name": g.name, "full_name": g.full_name,
            "table_ids": list(g.table_ids), "tables": [names.get(t, str(t)) for t in g.table_ids],
            "bucket_num": g.bucket_num, "replication_num": g.replication_num, "dist_col_types": list(g.dist_col_types),
            "stable": g.stable, "unstable_reason": g.unstable_reason, "version": g.version,
            "layout_buckets": g.layout}


def group_reasons(catalog: Catalog, g: GroupView) -> list[str]:
    """The recorded reason, then the stability check's per-replica reasons when it recorded any."""
    if g.stable:
        return []
    out = [g.unstable_reason] if g.unstable_reason else []
    health = getattr(catalog, "group_health", None)
    if health is not None:
        try:
            out += [r.text for r in health(g.group_id).reasons if r.text not in out]
        except ColocateError:
            pass
    return out or ["marked unstable"]


def group_detail(catalog: Catalog, g: GroupView, names: dict[int, str] | None = None) -> dict:
    slots: dict[str, int] = {}
    for row in g.bucket_map:
        for be in row:
            slots[str(be)] = slots.get(str(be), 0) + 1
    return dict(group_model(g, names if names is not None else table_names(catalog)),
                bucket_map=[list(r) for r in g.bucket_map], reasons=group_reasons(catalog, g), slots=slots,
                layouts={str(c): n for c, n in sorted(catalog.groups.layouts(g.group_id).items())})


def backend_model(b: BackendView, load: dict[str, int]) -> dict:
    """A backend with its load, and its state as the on-call engineer asks it (why, since when,
    last heartbeat, the last probe's own finding: ``BackendView.state_fields``)."""
    used = load.get("bytes", 0)
    return {"id": b.id, "name": b.name, "root_uri": b.root_uri, "host": b.host, **b.state_fields(),
            "capacity_bytes": b.capacity_bytes, "slots": load.get("slots", 0), "replicas": load.get("replicas", 0),
            "bytes": used, "used_fraction": (used / b.capacity_bytes) if b.capacity_bytes else None}


def backends_with_load(catalog: Catalog) -> list[dict]:
    loads = catalog.backends.loads()
    return [backend_model(b, loads.get(b.id, {})) for b in catalog.backends.list()]


def job_model(j: JobView) -> dict:
    plan, progress = j.plan or {}, j.progress or {}
    moves = plan.get("moves") or []
    planned = sum(int(mv.get("bytes") or 0) for mv in moves if isinstance(mv, dict))
    copied = int(progress.get("bytes") or 0) if isinstance(progress.get("bytes"), (int, float)) else 0
    step = progress.get("step")
    if step == "finished" or j.state in ("done", "committed"):
        done = 1.0
    elif planned:
        done = min(1.0, copied / planned)
    else:
        done = None
    eta = None
    if j.kind not in ("write", "gc"):  # a balance job: time left at its copy rate so far (jobs.balance)
        from datetime import datetime, timezone

        from airflow_colocate.jobs.balance_outcome import job_progress

        eta = job_progress(j, datetime.now(timezone.utc))["eta_seconds"]
    return {"id": j.id, "kind": j.kind, "state": j.state, "group_id": j.group_id, "group": j.group or None,
            "subject": j.subject, "rows": progress.get("rows") if isinstance(progress.get("rows"), int) else None,
            "step": step if isinstance(step, str) else None, "moves": len(moves), "planned_bytes": planned,
            "copied_bytes": copied, "done_fraction": done, "eta_seconds": eta, "progress": progress,
            "created_at": j.created_at, "updated_at": j.updated_at}


def event_model(e: EventView) -> dict:
    return {"event_id": e.id, "ts": e.ts, "kind": e.kind, "subject": e.subject, "detail": e.detail, "actor": e.actor}


def table_detail(catalog: Catalog, ref: str) -> dict:
    """A table with its schema versions, retention and recycle bin (the schema API's answer)."""
    t = catalog.tables.get(ref)
    return {"id": t.id, "table": t.qualified_name, "group": t.group_name, "columns": [list(c) for c in t.columns],
            "dist_cols": list(t.dist_cols), "partition_cols": list(t.partition_cols), "schema_version": t.schema_version,
            "retention_days": t.retention_days,
            "versions": [{"version": v.version, "columns": [list(c) for c in v.columns],
                          "change": [{k: str(x) for k, x in c.items()} for c in v.change],
                          "created_at": v.created_at.isoformat()} for v in catalog.schemas.history(t.id)],
            "dropped_partitions": [p.value for p in catalog.partitions.list(t.id, dropped=True)]}
