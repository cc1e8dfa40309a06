"""Sizes as people read them in a task log or a table: ``43204608`` -> ``41.2 MiB``."""

from __future__ import annotations

from airflow_colocate.core.errors import InvalidArgument

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


def parse_size(value: str | int, what: str) -> int:
    """``536870912``, ``512m``, ``1g``, ``512MiB`` -> bytes (Spark's size strings, binary units)."""
    text = str(value).strip().lower().removesuffix("ib").removesuffix("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    try:
        if text and text[-1] in units:
            size = int(float(text[:-1]) * units[text[-1]])
        else:
            size = int(text)
    except ValueError:
        raise InvalidArgument(f"{what} {value!r} is not a size: expected bytes or a number with k, m, g or t "
                              "(e.g. 512m)") from None
    if size < 0:
        raise InvalidArgument(f"{what} {value!r} is negative: expected 0 (no hash join) or a positive size")
    return size


__all__ = ["human_bytes", "parse_size"]
