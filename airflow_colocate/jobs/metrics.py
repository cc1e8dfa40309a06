"""What the operators, the sensor, balance and verify tell the deployment's metrics system, through
Airflow's own ``Stats`` (StatsD, Datadog or OpenTelemetry, whichever ``[metrics]`` configures;
nothing when none is): every name starts with ``colocate.`` and is listed in docs/operations.md.

A metric is an observation, never a reason to fail: every emission swallows its own error (a
StatsD host that does not resolve, a broken OpenTelemetry exporter) with one warning per process,
after the write or clone it describes has committed. A task process has ``Stats`` set up by
Airflow's task runner; a ``colocate`` command sets it up here from the same ``[metrics]``
settings on first use, so a balance run from cron is counted as one run by Airflow.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from airflow_colocate.model.reasons import tag_of

log = logging.getLogger(__name__)
PREFIX = "colocate."
_lock = threading.Lock()
_ready = False
_warned = False


def _stats():
    """Airflow's stats module, set up from ``[metrics]`` if nobody in this process did yet."""
    global _ready
    from airflow.sdk.observability import stats

    with _lock:
        if not _ready:
            try:  # whether this process's Stats has a backend factory (the task runner sets one)
                from airflow.sdk._shared.observability.metrics import stats as shared

                configured = getattr(shared, "_factory", None) is not None
            except ImportError:
                configured = True
            if not configured:  # a colocate command: configure as the task runner does
                from airflow.sdk.configuration import conf
                from airflow.sdk.observability.metrics.stats_utils import (
                    get_stats_factory,
                )

                stats.initialize(factory=get_stats_factory(),
                                 export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=False))
            _ready = True
    return stats


def _warn_once(exc: BaseException) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("colocate: metrics not sent (%s: %s); the task goes on", type(exc).__name__, exc)


def _safe(fn: Callable[..., None]) -> Callable[..., None]:
    """An emitter that cannot raise: whatever goes wrong while reading what it reports or
    sending it is one warning per process."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - see the module docstring
            _warn_once(exc)

    return wrapper


def _send(kind: str, name: str, value: Any = None, tags: Mapping[str, Any] | None = None) -> None:
    try:
        stats = _stats()
        stat = PREFIX + name
        clean = {k: str(v) for k, v in (tags or {}).items() if v is not None} or None
        if kind == "incr":
            stats.incr(stat, count=int(value if value is not None else 1), tags=clean)
        elif kind == "gauge":
            stats.gauge(stat, float(value), tags=clean)
        else:  # timing, in milliseconds as StatsD expects a number
            stats.timing(stat, float(value) * 1000.0, tags=clean)
    except Exception as exc:  # noqa: BLE001 - see the module docstring
        _warn_once(exc)


def incr(name: str, count: int = 1, **tags: Any) -> None:
    _send("incr", name, count, tags)


def gauge(name: str, value: float, **tags: Any) -> None:
    _send("gauge", name, value, tags)


def timing(name: str, seconds: float, **tags: Any) -> None:
    _send("timing", name, seconds, tags)


def reason_tag(reason: str | None) -> str:
    """The reason of a fallback as one of a few values (tags must not explode a TSDB's series)."""
    return tag_of(reason)


# ---------------------------------------------------------------------- one call per emitter


@_safe
def write_committed(summary: Mapping[str, Any], *, kind: str = "write") -> None:
    """A committed write (or a join's output): rows, bytes and replicas written, its Spark time."""
    table = summary.get("table")
    incr(f"{kind}.committed", table=table)
    incr(f"{kind}.rows", int(summary.get("rows") or 0), table=table)
    incr(f"{kind}.bytes", int(summary.get("bytes") or 0), table=table)
    incr(f"{kind}.replicas", int(summary.get("replicas") or 0), table=table)
    if summary.get("missing_replicas"):
        incr(f"{kind}.missing_replicas", len(summary["missing_replicas"]), table=table)
    if summary.get("seconds") is not None:
        timing(f"{kind}.seconds", float(summary["seconds"]), table=table)


@_safe
def join_finished(summary: Mapping[str, Any]) -> None:
    """One count per join of the query: ``join.colocated``, or ``join.fallback`` with the reason
    as a tag; the replicas the read found bad; the output as a write."""
    for j in summary.get("joins") or []:
        if j.get("colocate"):
            incr("join.colocated", method=j.get("method"))
        else:
            incr("join.fallback", reason=reason_tag(j.get("reason")))
    if not summary.get("joins"):
        incr("join.no_join")
    if summary.get("marked_bad"):
        incr("replica.marked_bad", len(summary["marked_bad"]), source="read")
    if summary.get("seconds") is not None:
        timing("join.seconds", float(summary["seconds"]))
    if summary.get("output"):
        write_committed(summary["output"], kind="join.output")


@_safe
def imported(summary: Mapping[str, Any]) -> None:
    """A bulk import: partitions committed and failed, rows and bytes placed."""
    table = summary.get("table")
    for key in ("partitions_committed", "partitions_failed", "rows", "bytes"):
        value = summary.get(key)
        if isinstance(value, (list, tuple)):
            value = len(value)
        if isinstance(value, (int, float)):
            incr(f"import.{key}", int(value), table=table)


@_safe
def clone_done(report, *, kind: str | None = None) -> None:
    """One clone job (a ``CloneReport``) of balance, relocate, repair or verify's repair: replicas
    and bytes copied, its time."""
    incr("clone.replicas", sum(1 for c in report.copies if c.ok), kind=kind)
    incr("clone.bytes", int(report.bytes), kind=kind)
    timing("clone.seconds", float(report.seconds), kind=kind)


@_safe
def verify_findings(checked: int, bad: int, *, tables: int | None = None) -> None:
    """A verify run: replicas re-hashed, and those found bad (marked for repair)."""
    incr("verify.checked", checked)
    incr("verify.bad", bad)
    gauge("verify.last_bad", bad)


@_safe
def read_failover(table: str | None = None, *, reason: str | None = None, count: int = 1) -> None:
    """A bucket read from another replica after the one chosen failed (page CRC, size, missing
    file, another bucket's rows, unreadable footer): the query went on, the replica is bad."""
    incr("read.failover", count, table=table, reason=reason)


@_safe
def group_waited(group: str, stable: bool, seconds: float | None = None) -> None:
    """The stable-group sensor's answer: ``sensor.stable`` or ``sensor.unstable`` per poke, and
    how long the task waited once the group is stable."""
    incr("sensor.stable" if stable else "sensor.unstable", group=group)
    if stable and seconds is not None:
        timing("sensor.wait_seconds", seconds, group=group)


__all__ = ["clone_done", "gauge", "group_waited", "imported", "incr", "join_finished", "read_failover",
           "reason_tag", "timing", "verify_findings", "write_committed"]
