"""Time values as the catalog stores them."""

from __future__ import annotations

from datetime import datetime, timezone


def utc(dt: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=timezone.utc)
