"""Pure rules of the domain that more than one layer asks: each is decided here once.

``group_join_fallback`` is the one answer to "do this group's joins shuffle now, and why": the read
planner asks it before it registers a query's tables, the group outlook (page, CLI, API) asks it
for every group, and metrics read its reasons back through :class:`~airflow_colocate.model.reasons.Fallback`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from airflow_colocate.model.reasons import Fallback, JoinPolicy


def backend_label(backend_id: int, names: Mapping[int, str]) -> str:
    """A backend as people know it: its name, or ``id 7`` for an id no backend row has any more."""
    return names.get(backend_id) or f"id {backend_id}"


def group_join_fallback(*, disabled: bool, stable: bool, unstable_reason: str | None, mapped: Iterable[int],
                        alive: Collection[int], names: Mapping[int, str],
                        policy: JoinPolicy = JoinPolicy.STABLE, unreadable: str | None = None) -> str | None:
    """Why a join on this group's tables shuffles now, or None when it may run colocated.

    The seeds' rule (``JoinPolicy.STABLE``): colocate join switched off, the group marked unstable,
    or a bucket map that names a backend which is not alive (a group is unstable until such a
    backend is repaired). Under ``JoinPolicy.READABLE`` an unstable group's joins stay bucketed
    unless ``unreadable`` names a bucket that no verified replica on an alive backend holds. A
    query can still fall back on a stable group when a partition it reads lacks a verified replica
    on the backend chosen for a bucket; the planner finds that per query."""
    if disabled:
        return Fallback.DISABLED.because()
    if policy is JoinPolicy.READABLE:
        return Fallback.NOT_STABLE.because(unreadable) if unreadable else None
    if not stable:
        return Fallback.NOT_STABLE.because(unstable_reason or "marked unstable")
    down = sorted(set(mapped) - set(alive))
    if down:
        labels = ", ".join(backend_label(b, names) for b in down)
        return Fallback.NOT_STABLE.because(f"its bucket map names backend(s) {labels}, which are not alive")
    return None


__all__ = ["backend_label", "group_join_fallback"]
