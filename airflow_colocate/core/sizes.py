"""Sizes as people read them in a task log or a table: ``43204608`` -> ``41.2 MiB``."""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(n: int | float | None) -> str:
    """Binary units (the ones ``du -h`` and Spark's UI use), three significant figures at most:
    ``0 B``, ``512 B``, ``1.5 KiB``, ``41.2 MiB``, ``1.07 TiB``; ``-`` for an unknown size."""
    if n is None:
        return "-"
    size = float(n)
    sign = "-" if size < 0 else ""
    size = abs(size)
    for unit in UNITS:
        if size < 1024 or unit == UNITS[-1]:
            break
        size /= 1024
    if unit == "B":
        return f"{sign}{int(size)} B"
    digits = 2 if size < 10 else 1 if size < 100 else 0
    return f"{sign}{size:.{digits}f} {unit}"


__all__ = ["human_bytes"]
