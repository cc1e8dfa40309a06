"""The join explain people read: a few stable lines per join, in the shape of the seeds' ``EXPLAIN``
(``HASH JOIN`` / ``join op`` / ``colocate: true`` or ``colocate: false, reason: …``), naming tables
and keys as the query does.

Spark's own plan line (``SortMergeJoin [o_orderkey#12L], [l_orderkey#40L], Inner``) carries
attribute ids that change with every run and say nothing to the reader; the raw physical plan stays
in the report (and XCom) for whoever needs it. Pure: it renders what the join job decided
(:class:`~airflow_colocate.core.contract.JoinExplain`), so a new decision is one more line here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_colocate.core.contract import JoinExplain

# JoinNode.kind (spark.physical_plan) -> the seeds' "join op" words
JOIN_OPS = {"inner": "INNER", "left": "LEFT OUTER", "right": "RIGHT OUTER", "full": "FULL OUTER",
            "semi": "LEFT SEMI", "anti": "LEFT ANTI"}
NO_JOIN = "no join in the query"


# Spark's "Shuffled" hash join reads its inputs as they are partitioned: under a colocated join no
# shuffle happens, so the name would mislead; the exchanges line says whether anything moved.
NAMES = {"ShuffledHashJoin": "HASH JOIN"}


def operator_name(description: str) -> str:
    """``SortMergeJoin [a#1], …`` -> ``SORT MERGE JOIN``: Spark's node name in the seeds' capitals."""
    node = description.split(" ", 1)[0].split("(", 1)[0] or "JOIN"
    return NAMES.get(node) or re.sub(r"(?<=[a-z])(?=[A-Z])", " ", node).upper()


def join_lines(index: int, e: JoinExplain) -> list[str]:
    """One join: its operator and type, the verdict, the tables of each side, the keys, the Exchanges."""
    op = JOIN_OPS.get(e.kind, e.kind.upper() or "INNER")
    verdict = "colocate: true" if e.colocate else f"colocate: false, reason: {e.reason or 'unknown'}"
    lines = [f"join {index}: {operator_name(e.join)} ({op})", f"  {verdict}"]
    if e.planned != e.colocate:
        lines.append(f"  planner predicted: colocate: {str(e.planned).lower()}")
    lines.append(f"  tables: {'+'.join(e.left_tables) or '?'} ⋈ {'+'.join(e.right_tables) or '?'}")
    lines.append(f"  keys: {', '.join(e.keys) if e.keys else 'none (no equality keys)'}")
    lines.append(f"  exchanges: {e.exchanges_left} left, {e.exchanges_right} right")
    return lines


def explain_text(explains: Sequence[JoinExplain], trailer: Sequence[str] = ()) -> str:
    """Every join of the query, innermost first, then ``trailer`` (lines about the whole query, such
    as how the colocated joins join inside a bucket)."""
    lines = [line for i, e in enumerate(explains, 1) for line in join_lines(i, e)]
    if not lines:
        return NO_JOIN
    return "\n".join(lines + [t for t in trailer if t])


def key_names(keys: Sequence[tuple[tuple[str, str] | None, tuple[str, str] | None]],
              shown: dict[str, str] | None = None) -> list[str]:
    """``[(("o", "o_orderkey"), ("l", "l_orderkey"))]`` -> ``["o.o_orderkey = l.l_orderkey"]``; a key
    that is an expression rather than a column reads ``<expression>``. ``shown`` maps Spark's
    lower-cased table names back to the names the query used."""
    shown = shown or {}

    def name(col: tuple[str, str] | None) -> str:
        return f"{shown.get(col[0], col[0])}.{col[1]}" if col else "<expression>"

    return [f"{name(left)} = {name(right)}" for left, right in keys]


__all__ = ["explain_text", "join_lines", "key_names", "operator_name", "JOIN_OPS", "NO_JOIN"]
