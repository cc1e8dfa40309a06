"""Join prediction: the seeds' rule for whether one join of a query runs colocated.

A join is colocated when its tables are in one group, the group is stable, colocate join is not
disabled (globally or for this run), and the equality keys cover the distribution columns position
by position. The Spark join job calls :func:`predict_join` on every join of the physical plan, so
this module imports nothing but the standard library: the Spark driver must not load the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_colocate.core.errors import InvalidArgument

if TYPE_CHECKING:
    from airflow_colocate.catalog.views import TableView

NOT_STABLE = "group is not stable"
NOT_SAME_GROUP = "tables are not in the same group"
NOT_COVERED = "join keys do not cover the distribution columns"
DISABLED = "colocate join is disabled"
NOT_COLOCATED = "table is not colocated"


def keys_cover(left_dist: Sequence[str], right_dist: Sequence[str], pairs: Sequence[tuple[str, str]]) -> bool:
    """Equality keys cover the distribution columns position by position: for every i, the pair
    (left_dist[i], right_dist[i]) is among the join's equality pairs. More pairs (``dt``) are fine."""
    have = {(a.lower(), b.lower()) for a, b in pairs}
    return len(left_dist) == len(right_dist) and all(
        (lc.lower(), rc.lower()) in have for lc, rc in zip(left_dist, right_dist))


Column = tuple[str, str]  # (table alias, column)


def predict_join(left: Sequence[str], right: Sequence[str], carriers: tuple[Sequence[str], Sequence[str]],
                 keys: Sequence[tuple[Column | None, Column | None]], *, reasons: Mapping[str, str],
                 groups: Mapping[str, str], dist_cols: Mapping[str, Sequence[str]]) -> tuple[bool, str | None]:
    """Whether one join of the query can run without a shuffle, and if not, why, from what the plan
    registered (``reasons``, ``groups``, ``dist_cols`` per table alias), the tables under each side,
    the tables whose bucketing still partitions each side (``carriers``), and the join's equality
    keys resolved to table columns. The join job compares this prediction with Spark's plan."""
    for table in [*left, *right]:
        if reasons.get(table):
            return False, reasons[table]
    if not left or not right or len({groups.get(t, "") for t in [*left, *right]}) != 1:
        return False, NOT_SAME_GROUP
    if not carriers[0] or not carriers[1]:
        return False, f"{NOT_COVERED}: an input is not partitioned by a bucket key any more (it comes out of a full outer join)"
    for lt in carriers[0]:
        for rt in carriers[1]:
            pairs = [(lk[1], rk[1]) for lk, rk in keys if lk and rk and lk[0] == lt and rk[0] == rt]
            if keys_cover(dist_cols[lt], dist_cols[rt], pairs):
                return True, None
    return False, NOT_COVERED


JOIN_SQL = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN",
            "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN"}


def structured_sql(views: Sequence[TableView], on: Sequence[Sequence[Sequence[str]]], how: str,
                   columns: Sequence[str]) -> str:
    """SQL for ``views[0] JOIN views[1] ON on[0] JOIN views[2] ON on[1] …``; tables partitioned
    alike also join on the partition column, the seeds' ``(dt, id)`` shape."""
    if how not in JOIN_SQL:
        raise InvalidArgument(f"invalid join type {how!r}: expected one of {', '.join(JOIN_SQL)}")
    if len(views) < 2 or len(on) != len(views) - 1:
        raise InvalidArgument(f"a structured join of {len(views)} tables needs {max(len(views) - 1, 1)} key lists in 'on', got {len(on)}")
    known = {c.lower() for v in views for c, _ in v.columns}
    for col in columns:
        if col.lower() not in known:
            raise InvalidArgument(f"column {col!r} is in none of the joined tables ({', '.join(v.name for v in views)})")
    sql = f"SELECT {', '.join(columns) or '*'} FROM {views[0].name}"
    for i, (view, pairs) in enumerate(zip(views[1:], on), 1):
        conds = []
        if view.partition_cols and views[0].partition_cols:
            conds.append(f"{views[0].name}.{views[0].partition_cols[0]} = {view.name}.{view.partition_cols[0]}")
        for pair in pairs:
            if len(pair) != 2:
                raise InvalidArgument(f"join key {pair!r} must be a [left column, right column] pair")
            conds.append(f"{pair[0]} = {view.name}.{pair[1]}")
        if not pairs:
            raise InvalidArgument(f"join {i} ({view.name}) has no equality keys")
        sql += f" {JOIN_SQL[how]} {view.name} ON " + " AND ".join(conds)
    return sql
