"""Balance strategies as data, as in Citus's shard rebalancer.

The one greedy loop in :mod:`airflow_colocate.placement.balance` moves a bucket from the fullest
backend to the emptiest one that may take it; a :class:`BalanceStrategy` says what "full" means:
what a bucket costs, what a backend can carry, where a bucket may go, which measure of unevenness
each move must shrink (its :class:`Objective`), and whether every group is evened by itself first.
Built in, in ``STRATEGIES``:

``count``
    cost 1, equal capacity, :data:`SQUARES`, per group: Doris's colocate balancer. Every group ends
    within one slot per backend, with the minimum number of moves when each host has one backend.
``size``
    cost = bytes, capacity = ``capacity_bytes``, :data:`DISTANCES`, all groups pooled: backend *i*
    ends near ``total_bytes * cap_i / sum(cap)`` (within 10% when buckets are small against it).

Two objectives because the promises differ: slot counts want the fewest moves (every move narrows a
gap: sum of squares), bytes want every disk near its share (sum of distances to the targets).

To add one: build a ``BalanceStrategy`` (reusing ``SQUARES`` or ``DISTANCES``) and either add it to
``STRATEGIES`` under its name (names are looked up there; an unknown one is refused with the list)
or pass the object itself as ``strategy=`` to :func:`~airflow_colocate.placement.balance.balance`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import ceil
from typing import NamedTuple, Protocol

from airflow_colocate.core.errors import InvalidArgument, PlacementError
from airflow_colocate.placement.model import BackendSlot

class Bucket(NamedTuple):
    """What a strategy may look at to weigh or place one bucket. ``group`` is ``None`` in
    :func:`balance`, which is given one map without its group id."""

    group: int | None
    seq: int
    bytes: int




class UnknownStrategy(InvalidArgument, PlacementError):
    """A strategy name not in ``STRATEGIES``. Malformed input (InvalidArgument), and still a
    PlacementError because callers of the placement library catch that for every refusal."""


# --------------------------------------------------------------------------------------------
# Objectives: what one move must shrink
# --------------------------------------------------------------------------------------------


class Objective(Protocol):
    """What a strategy's loop asks about levels (summed costs) and targets (fair shares).

    ``rank`` orders backends, fullest last, and rises with level for a fixed target (so with equal
    targets the loop orders by level alone). ``opens`` says whether some move from ``src`` to
    ``dst`` could still gain ``floor``; it must stay false for every ``dst`` ranked above one where
    it is false, so the scan can stop there. ``gain`` is what moving a bucket of cost ``x`` gains,
    rising up to ``peak`` and falling after it. ``floor`` turns the caller's ``threshold`` into the
    least gain a move must have. Plain functions of numbers: the loop calls them once per move.
    """

    def rank(self, level: float, target: float) -> float: ...

    def floor(self, threshold: float, total: float, backends: int) -> float: ...

    def opens(self, src_level: float, src_target: float, dst_level: float, dst_target: float, floor: float) -> bool: ...

    def peak(self, src_level: float, src_target: float, dst_level: float, dst_target: float) -> float: ...

    def gain(self, src_level: float, src_target: float, dst_level: float, dst_target: float, x: float) -> float: ...


class SumOfSquares:
    """Shrink the sum of squared distances ``(level - target)**2``: moving cost ``x`` across a gap
    ``g`` (the difference of the two distances) gains ``x*(g - x)``, so with unit costs a move
    needs a gap of 2 (with a gap of 1 it would only swap who is fuller) and ``threshold`` raises
    that to ``ceil(threshold * average level)``. Any gap counts, even between two backends above
    target, which is what lets the host rule's detours still even things out.

    Why this is minimal with unit costs: while every fullest backend can give to an emptiest one
    (always true with one backend per host), sources are a current maximum and destinations a
    current minimum, so no backend is ever both filled and drained and the ``ceil`` shares go to
    the backends that were fullest: the number of moves is the exact minimum. When the host rule
    forbids every move from the fullest backend, it is set aside and the pass repeats while it
    makes progress; the result is a local optimum (no single allowed move narrows a gap of 2 or
    more), and since every move lowers the sum of squared levels by at least 2, the plan is bounded.
    """

    def rank(self, level: float, target: float) -> float:
        return level - target

    def floor(self, threshold: float, total: float, backends: int) -> float:
        return max(2, ceil(threshold * total / backends)) - 1

    def opens(self, src_level: float, src_target: float, dst_level: float, dst_target: float, floor: float) -> bool:
        gap = (src_level - dst_level) - (src_target - dst_target)  # exact for integer levels, equal targets
        return gap > 0 and gap * gap >= 4 * floor  # the best gain is gap*gap/4

    def peak(self, src_level: float, src_target: float, dst_level: float, dst_target: float) -> float:
        return ((src_level - dst_level) - (src_target - dst_target)) / 2

    def gain(self, src_level: float, src_target: float, dst_level: float, dst_target: float, x: float) -> float:
        return x * ((src_level - dst_level) - (src_target - dst_target) - x)


class SumOfDistances:
    """Shrink the sum of distances ``|level - target|``: with ``a`` over target on the source and
    ``b`` under it on the destination, moving cost ``x`` gains ``min(x, a, b, a+b-x)`` (half the
    shrinkage), so the best bucket is the smallest one of at least ``min(a, b)`` if it is at most
    ``max(a, b)``, else the biggest one that fits the deficit, whichever gains more.

    Guaranteed: each move shrinks the sum by a positive amount (a hair above float noise, or
    ``threshold * average target``), so the loop ends and never moves without improving. At the end
    no allowed move from an over-target backend to an under-target one gains that much; so with
    buckets small against the targets (each at most a few percent of the smallest one) every
    backend ends within about one bucket of its target, well inside 10% of its fair share. Not
    guaranteed: the least bytes moved (a bin-packing problem); "biggest bucket that fits" is close.
    """

    def rank(self, level: float, target: float) -> float:
        return (level - target) / target

    def floor(self, threshold: float, total: float, backends: int) -> float:
        return max(1e-9 * total / backends, threshold * total / backends)

    def opens(self, src_level: float, src_target: float, dst_level: float, dst_target: float, floor: float) -> bool:
        return src_level > src_target and dst_level < dst_target

    def peak(self, src_level: float, src_target: float, dst_level: float, dst_target: float) -> float:
        return min(src_level - src_target, dst_target - dst_level)

    def gain(self, src_level: float, src_target: float, dst_level: float, dst_target: float, x: float) -> float:
        a = src_level - src_target
        b = dst_target - dst_level
        lo, hi = (a, b) if a <= b else (b, a)
        return x if x <= lo else lo if x <= hi else a + b - x


SQUARES: Objective = SumOfSquares()
DISTANCES: Objective = SumOfDistances()


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BalanceStrategy:
    """One way to balance, as data.

    ``cost`` weighs a bucket: a number >= 0, or a function of the :class:`Bucket` giving one; a
    backend's level is the cost of what it holds. ``capacity`` is what a backend can carry: a
    number > 0, or a function of the :class:`BackendSlot` giving one or ``None`` when unknown (that
    counts as the median of the known ones, so it neither hoards nor starves); targets split the
    total level in proportion. A plain number means "the same for all" and spares a call per bucket.
    ``objective`` is what every move must shrink (:data:`SQUARES` or :data:`DISTANCES`).
    ``per_group``: each group is evened by itself, then the totals without widening any group's
    spread, and ``load`` (other groups) only breaks ties inside one group; otherwise all buckets
    are pooled and ``load`` counts in the levels. ``needs_bytes``: refuse to run without
    ``bucket_bytes``. ``allowed`` vetoes a destination for a bucket (``None``: anywhere the host
    rule allows); it never moves a bucket off a backend, nor changes that backend's target.
    """

    name: str
    cost: float | Callable[[Bucket], float]
    capacity: float | Callable[[BackendSlot], float | None]
    objective: Objective
    per_group: bool
    needs_bytes: bool = False
    allowed: Callable[[Bucket, BackendSlot], bool] | None = None

    def __post_init__(self) -> None:
        def number(value: object) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool)

        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgument(f"a balance strategy needs a non-empty name, got {self.name!r}")
        if not callable(self.cost) and not (number(self.cost) and self.cost >= 0):
            raise InvalidArgument(
                f"strategy {self.name!r}: cost must be a number >= 0 or a function of a Bucket, got {self.cost!r}"
            )
        if not callable(self.capacity) and not (number(self.capacity) and self.capacity > 0):
            raise InvalidArgument(
                f"strategy {self.name!r}: capacity must be a number > 0 or a function of a BackendSlot, "
                f"got {self.capacity!r}"
            )
        asks = ("rank", "floor", "opens", "peak", "gain")
        missing = [name for name in asks if not callable(getattr(self.objective, name, None))]
        if missing:
            raise InvalidArgument(
                f"strategy {self.name!r}: objective {self.objective!r} lacks {', '.join(missing)}; "
                f"use SQUARES or DISTANCES"
            )
        if self.allowed is not None and not callable(self.allowed):
            raise InvalidArgument(
                f"strategy {self.name!r}: allowed must be a function of (Bucket, BackendSlot) or None, got {self.allowed!r}"
            )


def _bytes(bucket: Bucket) -> int:
    return bucket.bytes


def _capacity_bytes(backend: BackendSlot) -> int | None:
    return backend.capacity_bytes


COUNT = BalanceStrategy("count", cost=1, capacity=1, objective=SQUARES, per_group=True)
SIZE = BalanceStrategy(
    "size", cost=_bytes, capacity=_capacity_bytes, objective=DISTANCES, per_group=False, needs_bytes=True
)
STRATEGIES: dict[str, BalanceStrategy] = {s.name: s for s in (COUNT, SIZE)}



def resolve_strategy(strategy: str | BalanceStrategy) -> BalanceStrategy:
    """The registered strategy of that name (or the strategy itself); a one-line error naming the valid ones."""
    if isinstance(strategy, BalanceStrategy):
        return strategy
    found = STRATEGIES.get(strategy) if isinstance(strategy, str) else None
    if found is None:
        names = [repr(name) for name in STRATEGIES]
        valid = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        raise UnknownStrategy(f"strategy must be {valid}, got {strategy!r}")
    return found


__all__ = ['BalanceStrategy', 'Bucket', 'COUNT', 'DISTANCES', 'Objective', 'SIZE', 'SQUARES', 'STRATEGIES', 'SumOfDistances', 'SumOfSquares', 'UnknownStrategy', 'resolve_strategy']
