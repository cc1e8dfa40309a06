"""How a group's bucket layouts read to a user (``group show``, the page): one function, one wording."""

from __future__ import annotations


def describe_layouts(bucket_num: int, layout: int, counts: dict[int, int]) -> str:
    """The map's bucket count, the count new versions are written with after a split, and how many
    committed partitions were written at each count (``Groups.layouts``)."""
    parts = ", ".join(f"{n} at {c}" for c, n in sorted(counts.items())) or "none committed"
    head = f"{bucket_num}" if layout == bucket_num else f"{bucket_num} in the map, new versions at {layout} (split)"
    return f"{head}; partitions: {parts}"


__all__ = ["describe_layouts"]
