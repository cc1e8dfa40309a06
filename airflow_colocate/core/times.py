"""Time values as the catalog stores them, and as a person reads them."""

from __future__ import annotations

from datetime import datetime, timezone


def utc(dt: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=timezone.utc)


def short_time(t: datetime | None, now: datetime) -> str:
    """``14:02 UTC`` today, ``2026-11-24 14:02 UTC`` another day: what a reader at a terminal needs."""
    if t is None:
        return ""
    t = utc(t).astimezone(timezone.utc)
    return f"{t:%H:%M} UTC" if t.date() == now.astimezone(timezone.utc).date() else f"{t:%Y-%m-%d %H:%M} UTC"
