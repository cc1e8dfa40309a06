"""Read Spark's physical plan: which joins have Exchange nodes feeding them, and from which tables.

This is the proof of a colocated join: the planner only decides how tables are registered; Spark
decides whether to shuffle, and this module reports what it decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_colocate.spark.register import BACKING_PREFIX

EXCHANGES = {"ShuffleExchangeExec", "BroadcastExchangeExec", "ReusedExchangeExec"}
STAGES = {"ShuffleQueryStageExec", "BroadcastQueryStageExec", "TableCacheQueryStageExec", "ResultQueryStageExec"}


@dataclass
class Side:
    exchanges: int = 0
    tables: list[str] = field(default_factory=list)


@dataclass
class JoinNode:
    description: str
    left: Side
    right: Side


def _children(node) -> list:
    name = node.getClass().getSimpleName()
    if name == "AdaptiveSparkPlanExec":
        return [node.executedPlan()]
    if name in STAGES:
        return [node.plan()]
    if name == "ReusedExchangeExec":
        return [node.child()]
    seq = node.children()
    return [seq.apply(i) for i in range(seq.size())]


def _table(node) -> str | None:
    try:
        ident = node.tableIdentifier()
        if ident.isDefined():
            name = ident.get().table()
            return name[len(BACKING_PREFIX):] if name.startswith(BACKING_PREFIX) else name
    except Exception:  # not a file scan
        return None
    return None


def _side(node, joins: list[JoinNode]) -> Side:
    """Exchanges between a join and its inputs, stopping at (but recursing into) nested joins."""
    side = Side()
    stack = [node]
    while stack:
        n = stack.pop()
        name = n.getClass().getSimpleName()
        if name in EXCHANGES:
            side.exchanges += 1
        if name.endswith("JoinExec"):
            inner = _join(n, joins)
            side.tables += inner.left.tables + inner.right.tables
            continue
        table = _table(n) if name.endswith("ScanExec") else None
        if table:
            side.tables.append(table)
        stack.extend(_children(n))
    return side


def _join(node, joins: list[JoinNode]) -> JoinNode:
    kids = _children(node)
    desc = node.simpleString(200) if hasattr(node, "simpleString") else node.toString()
    j = JoinNode(description=str(desc).splitlines()[0], left=Side(), right=Side())
    joins.append(j)  # outer joins are appended before their inner ones finish: order fixed below
    j.left = _side(kids[0], joins)
    j.right = _side(kids[1], joins) if len(kids) > 1 else Side()
    return j


def joins_of(df) -> list[JoinNode]:
    """Every join node of ``df``'s physical plan, innermost first."""
    plan = df._jdf.queryExecution().executedPlan()
    joins: list[JoinNode] = []
    stack = [plan]
    while stack:
        n = stack.pop()
        if n.getClass().getSimpleName().endswith("JoinExec"):
            _join(n, joins)
            continue
        stack.extend(_children(n))
    return list(reversed(joins))


def plan_text(df) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())
