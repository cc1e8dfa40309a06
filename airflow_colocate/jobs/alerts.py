"""What has been wrong for too long: a group unstable, or a backend down, past a threshold. The
maintenance DAG's ``alert`` task fails with these lines, so whatever the deployment already has
for a failed task (email, Slack, ``on_failure_callback``) carries the reason, with no alerting
system of our own. The times come from the catalog's clock and its records (state changes, the
event log), the same figures ``/api/colocate/metrics`` shows."""

from __future__ import annotations

from datetime import timedelta

from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.jobs.health import relocate_delay_from_env

MIN_DEFAULT = timedelta(minutes=10)
"""The default threshold is never shorter: with a relocate delay of 0 (tests, a demo that
repairs at once) twice the delay would alert on every probe blip."""


def threshold_of(minutes: float | str | None) -> timedelta:
    """The alert threshold: ``minutes`` if given, else twice the relocate delay (a backend down
    that long should have been relocated already, and the repair should have finished), at least
    :data:`MIN_DEFAULT`."""
    if minutes in (None, "", "None", "null"):
        return max(2 * relocate_delay_from_env(), MIN_DEFAULT)
    try:
        value = float(minutes)
    except (TypeError, ValueError):
        raise InvalidArgument(f"alert threshold {minutes!r}: expected a number of minutes, e.g. 60 "
                              "(empty: twice the relocate delay)") from None
    if value < 0:
        raise InvalidArgument(f"alert threshold {minutes!r}: must not be negative (e.g. 60)")
    return timedelta(minutes=value)


def _took(delta: timedelta) -> str:
    return str(timedelta(seconds=int(delta.total_seconds())))


def overdue(catalog, threshold: timedelta) -> list[str]:
    """One line per group unstable and per backend down for longer than ``threshold``: who, how
    long, since when, and the recorded reason."""
    mx = catalog.metrics.read()
    lines = []
    for g in mx.groups:
        if g.stable or g.unstable_since is None:
            continue
        took = mx.now - g.unstable_since
        if took > threshold:
            lines.append(f"group {g.group} ({g.group_id}) unstable for {_took(took)} (since "
                         f"{g.unstable_since.isoformat(timespec='seconds')}, threshold {_took(threshold)}): {g.reason}")
    for b in mx.backends:
        took = mx.now - b.state_since
        if b.state == "down" and took > threshold:
            lines.append(f"backend {b.name} down for {_took(took)} (since {b.state_since.isoformat(timespec='seconds')}, "
                         f"threshold {_took(threshold)}): {b.reason or 'no reason recorded'}")
    return lines


__all__ = ["overdue", "threshold_of"]
