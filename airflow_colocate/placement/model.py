"""The few shapes every placement algorithm shares, and the checks they all need.

Placement works on plain values (ids, host names, lists) so that the catalog, the planner and the
tests can all build its input without a database, and so that the same input always gives the same
answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from airflow_colocate.core.errors import PlacementError

BucketMap = list[list[int]]
"""Index = bucket seq; value = the backend ids holding that bucket, first = primary.

A plain nested list (not a class) because it is what the catalog stores and what
``SHOW PROC '/colocation_group/<id>'`` prints; wrapping it would only add conversions.
"""


@dataclass(frozen=True)
class BackendSlot:
    """What placement needs to know about one backend, and nothing else.

    ``available`` folds "alive" and "not decommissioning" into one flag because placement treats
    them alike: neither may receive a new replica, and both must be replaced in a map. The catalog
    decides how long a backend may be down before it counts as unavailable.
    ``capacity_bytes`` is only read by the size balancer; ``None`` means "unknown", which counts as
    the median capacity so one unconfigured backend does not attract or repel every bucket.
    """

    id: int
    host: str
    capacity_bytes: int | None = None
    available: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, int):
            raise PlacementError(f"backend id must be an int, got {self.id!r}")
        if not isinstance(self.host, str) or not self.host:
            raise PlacementError(
                f"backend {self.id} needs a non-empty host name (two backends on one host never "
                f"hold two replicas of one bucket), got {self.host!r}"
            )
        if self.capacity_bytes is not None and (
            isinstance(self.capacity_bytes, bool)
            or not isinstance(self.capacity_bytes, int)
            or self.capacity_bytes <= 0
        ):
            raise PlacementError(
                f"backend {self.id}@{self.host} has capacity_bytes {self.capacity_bytes!r}: "
                f"it must be a positive int, or None when unknown"
            )

    @property
    def label(self) -> str:
        """``be<id>@<host>``: short enough for a one-line error, and shows the host clash."""
        return f"be{self.id}@{self.host}"


def index_backends(backends: Iterable[BackendSlot]) -> dict[int, BackendSlot]:
    """Backends by id; a repeated id is refused because every map entry must mean one backend."""
    by_id: dict[int, BackendSlot] = {}
    for backend in backends:
        if not isinstance(backend, BackendSlot):
            raise PlacementError(f"expected BackendSlot values, got {backend!r}")
        previous = by_id.get(backend.id)
        if previous is not None:
            raise PlacementError(
                f"backend id {backend.id} is listed twice ({previous.label} and {backend.label}): "
                f"each backend must appear once"
            )
        by_id[backend.id] = backend
    return by_id


def describe(backends: Iterable[BackendSlot], limit: int = 10) -> str:
    """A readable, bounded list for error messages: a cluster of 1,000 must not flood a log line."""
    labels = [b.label for b in backends]
    if not labels:
        return "none"
    if len(labels) > limit:
        return ", ".join(labels[:limit]) + f", and {len(labels) - limit} more"
    return ", ".join(labels)


def check_rows(bucket_map: Sequence[Sequence[int]], what: str = "the map") -> None:
    """Refuse a map whose bucket lists a backend twice: no algorithm here can repair that safely,
    because we cannot tell which of the two entries the files really are on."""
    for seq, row in enumerate(bucket_map):
        if len(set(row)) != len(row):
            twice = sorted({be for be in row if list(row).count(be) > 1})
            raise PlacementError(
                f"bucket {seq} of {what} lists backend {twice[0]} more than once ({list(row)}): "
                f"each replica of a bucket must be on a different backend"
            )


def check_all_available(
    bucket_map: Sequence[Sequence[int]], by_id: Mapping[int, BackendSlot], what: str = "the map"
) -> None:
    """Balancing a map that still names a dead backend would plan clones from a missing source,
    so the caller is told to relocate first instead."""
    for seq, row in enumerate(bucket_map):
        for be in row:
            slot = by_id.get(be)
            if slot is None:
                raise PlacementError(
                    f"bucket {seq} of {what} names backend {be}, which is not among the "
                    f"{len(by_id)} backends given: run relocate() first, then balance"
                )
            if not slot.available:
                raise PlacementError(
                    f"bucket {seq} of {what} names {slot.label}, which is down or "
                    f"decommissioning: run relocate() first, then balance"
                )


def check_maps(maps: Mapping[int, Sequence[Sequence[int]]], backends: Iterable[BackendSlot], *,
               named: bool = True) -> dict[int, BackendSlot]:
    """The backends by id, once every map was found fit to balance: the checks of :func:`balance_all`
    (``named``: an error names the group) or of :func:`balance` in one pass, for a caller that hands
    several groups over at once."""
    by_id = index_backends(backends)
    for group, bucket_map in maps.items():
        what = f"group {group}" if named else "the map"
        check_rows(bucket_map, what)
        check_all_available(bucket_map, by_id, what)
    return by_id
