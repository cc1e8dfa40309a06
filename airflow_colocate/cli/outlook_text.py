"""A group's outlook in words, for ``colocate group list`` and ``group show``: since when it is
unstable, when relocation starts, whether its joins shuffle now."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow_colocate.catalog.outlook import GroupOutlook
from airflow_colocate.cli.output import timestamp
from airflow_colocate.model.reasons import Fallback
from airflow_colocate.model.views import GroupView

OUTLOOK_COLUMNS = ["GroupId", "GroupName", "IsStable", "UnstableSince", "RelocationStartsAt", "RelocationDue",
                   "JoinsShuffle", "UnstableReason"]


def _in(now: datetime, then: datetime) -> str:
    minutes = max(0, round((then - now).total_seconds() / 60))
    return f"in {minutes} min" if minutes < 120 else f"in {minutes / 60:.1f} h"


def _minutes(delay: timedelta) -> str:
    return f"{delay.total_seconds() / 60:g} min"


def outlook_lines(o: GroupOutlook, now: datetime, stable: bool) -> list[tuple[str, str]]:
    """What happens next, in words: since when, when relocation starts, whether joins shuffle."""
    delay = timedelta(seconds=o.relocate_delay_seconds)
    down = ", ".join(o.relocation_backends)
    if not o.relocation_backends:
        relocation = "none: every backend its map names is alive"
    elif o.relocation_disabled:
        relocation = f"not automatic: disable_colocate_relocate is set ({down} not alive)"
    elif o.relocation_due:
        relocation = f"due now: the next repair or balance run relocates the buckets of {down}"
    elif o.relocation_starts_at is not None:
        relocation = (f"starts at {timestamp(o.relocation_starts_at)} ({_in(now, o.relocation_starts_at)}, "
                      f"delay {_minutes(delay)}; {down} down)")
    else:
        relocation = f"waits for {down} ({_minutes(delay)} after it went down)"
    return [("unstable since", timestamp(o.unstable_since) if o.unstable_since else "-"),
            ("relocation", relocation),
            ("joins", _joins(o, stable))]


def _joins(o: GroupOutlook, stable: bool) -> str:
    if not o.joins_shuffle and not stable:
        return f"stay bucketed (join policy readable; {o.remote_buckets} buckets read remotely)"
    if not o.joins_shuffle:
        return "colocated (no shuffle)"
    if not stable and Fallback.of(o.joins_shuffle_reason) is not Fallback.DISABLED:
        return "shuffle now: the group is not stable (the reason is its state above)"
    return f"shuffle now: {o.joins_shuffle_reason}"


def outlook_row(g: GroupView, o: GroupOutlook) -> list:
    return [g.group_id, g.full_name, g.stable, o.unstable_since, o.relocation_starts_at, o.relocation_due,
            o.joins_shuffle, g.unstable_reason]
