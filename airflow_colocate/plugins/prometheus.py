"""The catalog's metrics (:meth:`Metrics.read`) in Prometheus' text exposition format (0.0.4),
served at ``/api/colocate/metrics``: what a Prometheus, a Grafana Agent or any OpenMetrics scraper
reads without an exporter of its own. The names are listed in docs/operations.md."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from airflow_colocate.catalog.metrics import CatalogMetrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BACKEND_STATES = ("alive", "down", "decommissioning", "decommissioned")
RUNNING = "running"

HELP = {
    "colocate_groups": ("gauge", "Colocation groups"),
    "colocate_groups_unstable": ("gauge", "Colocation groups that are not stable (joins on them fall back)"),
    "colocate_group_stable": ("gauge", "1 if the group is stable, else 0"),
    "colocate_group_unstable_seconds": ("gauge", "Seconds since the group became unstable (0 while stable)"),
    "colocate_group_buckets": ("gauge", "Bucket seqs of the group"),
    "colocate_group_layout_buckets": ("gauge", "The bucket count the group's new versions are written with (after a split: a multiple of its bucket seqs)"),
    "colocate_group_layout_partitions": ("gauge", "Committed partitions of the group's tables written at each bucket count"),
    "colocate_group_buckets_under_replicated": ("gauge", "Bucket seqs with fewer good replicas on alive backends than replication_num"),
    "colocate_group_bad_replicas": ("gauge", "Bad replicas of the group's visible partition versions"),
    "colocate_buckets_under_replicated": ("gauge", "Under-replicated bucket seqs over every group"),
    "colocate_replicas_bad": ("gauge", "Bad replicas of visible versions over every group (balance repairs them)"),
    "colocate_partitions_unavailable": ("gauge", "Committed partitions no read can serve: a bucket's verified replicas are all on backends that are not alive"),
    "colocate_table_partitions_unavailable": ("gauge", "Unavailable partitions of the table (its last readable copy is on a backend that is not alive)"),
    "colocate_backends": ("gauge", "Backends by state"),
    "colocate_backend_up": ("gauge", "1 if the backend is alive, else 0"),
    "colocate_backend_state_seconds": ("gauge", "Seconds the backend has been in its current state"),
    "colocate_backend_bytes": ("gauge", "Verified bytes of visible versions on the backend"),
    "colocate_backend_capacity_bytes": ("gauge", "The backend's declared capacity (only backends that declare one)"),
    "colocate_backend_bad_replicas": ("gauge", "Bad replicas of visible versions on the backend"),
    "colocate_backend_partitions_unavailable": ("gauge", "Partitions unavailable while the backend is not alive (it holds the only verified copy of one of their buckets)"),
    "colocate_balance_jobs": ("gauge", "Balance jobs (relocate, balance, repair) by kind and state"),
    "colocate_balance_job_oldest_seconds": ("gauge", "Age of the oldest running balance job of the kind"),
    "colocate_balance_job_idle_seconds": ("gauge", "Seconds the running balance job of the kind longest without progress has been idle"),
    "colocate_replica_oldest_unverified_seconds": ("gauge", "Seconds since the least recently checked verified replica was written or re-hashed"),
}


def _label(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _seconds(now: datetime, since: datetime | None) -> float:
    return 0.0 if since is None else max(0.0, (now - since).total_seconds())


def render(mx: CatalogMetrics) -> str:
    """One exposition: every family's HELP and TYPE, then its samples."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)

    def add(name: str, value: float, **labels: str) -> None:
        samples[name].append((labels, value))

    now = mx.now
    add("colocate_groups", len(mx.groups))
    add("colocate_groups_unstable", sum(1 for g in mx.groups if not g.stable))
    for g in mx.groups:
        add("colocate_group_stable", int(g.stable), group=g.group)
        add("colocate_group_unstable_seconds", 0.0 if g.stable else _seconds(now, g.unstable_since), group=g.group)
        add("colocate_group_buckets", g.bucket_num, group=g.group)
        add("colocate_group_layout_buckets", g.layout_buckets or g.bucket_num, group=g.group)
        for buckets, n in g.layouts:
            add("colocate_group_layout_partitions", n, group=g.group, buckets=str(buckets))
        add("colocate_group_buckets_under_replicated", g.under_replicated, group=g.group)
        add("colocate_group_bad_replicas", g.bad_replicas, group=g.group)
    add("colocate_buckets_under_replicated", sum(g.under_replicated for g in mx.groups))
    add("colocate_replicas_bad", sum(g.bad_replicas for g in mx.groups))
    add("colocate_partitions_unavailable", sum(t.unavailable_partitions for t in mx.tables))
    for t in mx.tables:
        add("colocate_table_partitions_unavailable", t.unavailable_partitions, table=t.table)
    for state in BACKEND_STATES:
        add("colocate_backends", sum(1 for b in mx.backends if b.state == state), state=state)
    for b in mx.backends:
        add("colocate_backend_up", int(b.state == "alive"), backend=b.name)
        add("colocate_backend_state_seconds", _seconds(now, b.state_since), backend=b.name, state=b.state)
        add("colocate_backend_bytes", b.bytes, backend=b.name)
        if b.capacity_bytes:
            add("colocate_backend_capacity_bytes", b.capacity_bytes, backend=b.name)
        add("colocate_backend_bad_replicas", b.bad_replicas, backend=b.name)
        add("colocate_backend_partitions_unavailable", b.unavailable_partitions, backend=b.name)
    for j in mx.jobs:
        add("colocate_balance_jobs", j.count, kind=j.kind, state=j.state)
        if j.state == RUNNING:
            add("colocate_balance_job_oldest_seconds", _seconds(now, j.oldest_created), kind=j.kind)
            add("colocate_balance_job_idle_seconds", _seconds(now, j.oldest_updated), kind=j.kind)
    if mx.oldest_unverified is not None:
        add("colocate_replica_oldest_unverified_seconds", _seconds(now, mx.oldest_unverified))
    lines = []
    for name, (kind, text) in HELP.items():
        if name not in samples:
            continue
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for labels, value in samples[name]:
            inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{inner}}} {_number(value)}" if inner else f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


__all__ = ["CONTENT_TYPE", "HELP", "render"]
