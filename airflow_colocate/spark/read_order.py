"""Whether a query's join keys are the order the colocated buckets' files are read in: then the
ordered read hands Spark's merge join its inputs sorted, and it sorts nothing. Read from the
parsed query's keys (spark.physical_plan) against the read orders the plan carries."""

from __future__ import annotations

from collections.abc import Sequence


def keys_in_read_order(key_names: Sequence[tuple[Sequence[str | None], Sequence[str | None]]],
                       orders: Sequence[Sequence[str]]) -> bool:
    """Whether every join's keys, on each side in the order written, are an order the colocated
    buckets are read in (``orders``: ``planner.join.read_orders``, carried by the plan). Then Spark's
    merge join finds its inputs in order (the ordered read) and sorts nothing; ``ON a.id = b.id AND
    a.dt = b.dt`` asks for (id, dt) and is sorted. A prediction for the choice: the rule in the jar
    decides at run time, and the explain reports what it did."""
    if not key_names:
        return False
    for sides in key_names:
        for names in sides:
            if not names or not any(list(names) == list(order[:len(names)]) for order in orders):
                return False
    return True
