"""Read Spark's plans: which joins have Exchange nodes feeding them, from which tables, and
on which columns of which tables they join.

This is the proof of a colocated join: the planner decides how tables are registered and predicts,
from the join keys read here, which joins need no shuffle; Spark decides whether to shuffle, and
this module reports what it decided, so the two can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_colocate.spark import locality
from airflow_colocate.spark.register import BACKING_PREFIX

EXCHANGES = {"ShuffleExchangeExec", "BroadcastExchangeExec", "ReusedExchangeExec"}
STAGES = {"ShuffleQueryStageExec", "BroadcastQueryStageExec", "TableCacheQueryStageExec", "ResultQueryStageExec"}


# Spark's join types, and which inputs' partitioning a join's output keeps (a full outer join
# keeps neither side's: rows without a match on the other side carry nulls for its keys).
JOIN_KINDS = {"Inner": "inner", "Cross": "inner", "LeftOuter": "left", "RightOuter": "right", "FullOuter": "full",
              "LeftSemi": "semi", "LeftAnti": "anti"}
KEEPS = {"inner": ("left", "right"), "left": ("left",), "semi": ("left",), "anti": ("left",),
         "right": ("right",), "full": ()}


@dataclass
class Side:
    exchanges: int = 0
    tables: list[str] = field(default_factory=list)
    # tables whose bucketing would still partition this side's output by the plan's structure
    # (not Spark's choices: the prediction must not look at the Exchanges it is checked against)
    carriers: list[str] = field(default_factory=list)
    # attribute id -> (table, column) for the columns scanned on this side, aliases followed
    columns: dict[int, tuple[str, str]] = field(default_factory=dict)


@dataclass
class JoinNode:
    description: str
    left: Side
    right: Side
    kind: str = "inner"
    # equality keys, pairwise: ((table, column) | None, (table, column) | None); None for an expression
    keys: list[tuple[tuple[str, str] | None, tuple[str, str] | None]] = field(default_factory=list)


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
            name = str(ident.get().table()).lower()  # Spark's identifiers are case-insensitive
            return name[len(BACKING_PREFIX):] if name.startswith(BACKING_PREFIX) else name
    except Exception:  # not a file scan
        return None
    return None


def _seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _attr_id(expr) -> int | None:
    if expr.getClass().getSimpleName() in ("AttributeReference", "PrettyAttribute"):
        return int(expr.exprId().id())
    return None


def _aliases(node, columns: dict[int, tuple[str, str]]) -> None:
    """``x AS y`` (a view's column, a rename): y is the same column of the same table as x."""
    for expr in _seq(node.projectList()):
        if expr.getClass().getSimpleName() == "Alias":
            child = expr.child()
            if child.getClass().getSimpleName() == "Cast":  # a view's no-op cast to its own type
                child = child.child()
            source = _attr_id(child)
            if source is not None and source in columns:
                columns[int(expr.exprId().id())] = columns[source]


def _side(node, joins: list[JoinNode]) -> Side:
    """Exchanges between a join and its inputs, stopping at (but recursing into) nested joins."""
    side = Side()
    projects = []
    stack = [node]
    while stack:
        n = stack.pop()
        name = n.getClass().getSimpleName()
        if name in EXCHANGES:
            side.exchanges += 1
        if name == "ProjectExec":
            projects.append(n)
        if name.endswith("JoinExec"):
            inner = _join(n, joins)
            side.tables += inner.left.tables + inner.right.tables
            side.columns.update(inner.left.columns)
            side.columns.update(inner.right.columns)
            side.carriers += [t for s in KEEPS.get(inner.kind, ()) for t in getattr(inner, s).carriers]
            continue
        table = _table(n) if name.endswith("ScanExec") else None
        if table:
            side.tables.append(table)
            side.carriers.append(table)
            for attr in _seq(n.output()):
                side.columns[int(attr.exprId().id())] = (table, str(attr.name()))
        stack.extend(_children(n))
    for project in reversed(projects):  # innermost first, so aliases of aliases resolve
        _aliases(project, side.columns)
    return side


def _keys(node, left: Side, right: Side) -> list:
    try:
        pairs = zip(_seq(node.leftKeys()), _seq(node.rightKeys()))
    except Exception:  # a join without equality keys (nested loop, cartesian)
        return []
    keys = []
    for lk, rk in pairs:
        lid, rid = _attr_id(lk), _attr_id(rk)
        keys.append((left.columns.get(lid) if lid is not None else None,
                     right.columns.get(rid) if rid is not None else None))
    return keys


def _join(node, joins: list[JoinNode]) -> JoinNode:
    kids = _children(node)
    desc = node.simpleString(200) if hasattr(node, "simpleString") else node.toString()
    try:
        kind = JOIN_KINDS.get(str(node.joinType().toString()), "other")
    except Exception:
        kind = "other"
    j = JoinNode(description=str(desc).splitlines()[0], left=Side(), right=Side(), kind=kind)
    joins.append(j)  # outer joins are appended before their inner ones finish: order fixed below
    j.left = _side(kids[0], joins)
    j.right = _side(kids[1], joins) if len(kids) > 1 else Side()
    j.keys = _keys(node, j.left, j.right)
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


ORDERED_NODE = "ColocateOrderedBucket"  # AssertOrderedExec's node name (java/.../colocate/ordered)


def final_plan(text: str) -> str:
    """An adaptive plan's text without its initial plan (which still shows the sorts the ordered
    read replaces when the stages are created); any other plan's text as it is."""
    if "== Final Plan ==" in text:
        return text.split("== Final Plan ==", 1)[1].split("== Initial Plan ==", 1)[0]
    return text


def ordered_reads(spark, df, text: str) -> str:
    """One line on how the plan orders the colocated buckets for its merge joins: read in key order
    (no sort, each row checked) or sorted by Spark. ``text``: ``df``'s plan text, which the caller
    builds once (tens of ms at a few long guard expressions). When the job ran ``df`` through a
    write, its own adaptive plan is never final: the jar's rule is then applied to its initial plan
    here, as the adaptive planner does when it creates the stages."""
    if "isFinalPlan=false" in text and locality.ordered_read(spark):
        try:
            initial = df._jdf.queryExecution().executedPlan().initialPlan()
            text = str(spark._jvm.colocate.ordered.SkipSortedSort().apply(initial).toString())
        except Exception:  # noqa: BLE001 - a line for the log; the query itself is unaffected
            pass
    text = final_plan(text)
    ordered = text.count(f"{ORDERED_NODE} [")
    sorts = sum(1 for line in text.splitlines() if line.lstrip(" :+-*()0123456789").startswith("Sort ["))
    return f"bucket reads: {ordered} in key order (no sort, order checked per row), {sorts} sorted by Spark"


# Nodes of a parsed query a LIMIT looks through to the join: they pass rows on as they come.
_STREAMING = {"Project", "Filter", "LocalLimit", "GlobalLimit", "SubqueryAlias", "UnresolvedHint"}


def _relations(node) -> set[str]:
    """The tables a parsed plan node reads (the last part of each name, lower case)."""
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n.getClass().getSimpleName() == "UnresolvedRelation":
            parts = _seq(n.multipartIdentifier())
            out.add(str(parts[-1]).lower())
        stack.extend(_seq(n.children()))
    return out


def _equalities(cond) -> list:
    """The ``a = b`` conjuncts of a join condition, as (left, right) expressions."""
    out, stack = [], [cond]
    while stack:
        e = stack.pop()
        name = e.getClass().getSimpleName()
        if name == "And":
            stack.extend([e.right(), e.left()])
        elif name in ("EqualTo", "EqualNullSafe"):
            out.append((e.left(), e.right()))
    return out


def _column_type(expr, tables: set[str], columns: dict[str, dict[str, str]]) -> str | None:
    """A key that names a column of the join's tables: its type, when the name has one type there."""
    name = _column_name(expr)
    if name is None:
        return None
    types = {columns[t][name] for t in tables if name in columns.get(t, {})}
    return types.pop() if len(types) == 1 else None


def _column_name(expr) -> str | None:
    """A key that names a column: the column's name (lower case); None for an expression."""
    if expr.getClass().getSimpleName() != "UnresolvedAttribute":
        return None
    return str(_seq(expr.nameParts())[-1]).lower()


def _aggregates(spark, project) -> bool:
    """A parsed ``SELECT count(*) FROM …`` is a Project until the analyzer makes it an Aggregate:
    whether its list calls an aggregate (or an unknown, or a window) function."""
    catalog = spark._jsparkSession.sessionState().catalog()
    stack = _seq(project.projectList())
    while stack:
        e = stack.pop()
        name = e.getClass().getSimpleName()
        if name.startswith("UnresolvedWindow") or name == "WindowExpression":
            return True
        if name == "UnresolvedFunction":
            fid = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(str(_seq(e.nameParts())[-1]))
            try:
                if str(catalog.lookupFunctionInfo(fid).getGroup()) in ("agg_funcs", "window_funcs"):
                    return True
            except Exception:  # not a built-in function: it may aggregate
                return True
        stack.extend(_seq(e.children()))
    return False


def query_shape(spark, query: str, columns: dict[str, dict[str, str]]
                ) -> tuple[bool, list[list[str | None]], list[tuple[list[str | None], list[str | None]]]]:
    """From the parsed query, before anything is registered (so the views are created once, hinted
    or not): whether it stops early (a LIMIT above its first join with only projections and filters
    between) and, for each join whose both sides read tables of ``columns`` (table -> column ->
    type, lower case), the types of its equality keys (a column's type, None for an expression)
    and their names on each side, in the order written (None for an expression).
    Raises whatever Spark's parser raises (the caller keeps its choice)."""
    root = spark._jsparkSession.sessionState().sqlParser().parsePlan(query)
    node, limited, streams = root, False, False
    while True:
        name = node.getClass().getSimpleName()
        if name == "Join":
            streams = limited
            break
        if name not in _STREAMING or node.children().size() != 1 or (name == "Project" and _aggregates(spark, node)):
            break
        limited = limited or "Limit" in name
        node = node.children().apply(0)
    keys, names, stack = [], [], [root]
    while stack:
        n = stack.pop()
        kids = _seq(n.children())
        stack.extend(kids)
        if n.getClass().getSimpleName() != "Join" or not n.condition().isDefined():
            continue
        sides = _relations(kids[0]) & columns.keys(), _relations(kids[1]) & columns.keys()
        if not (sides[0] and sides[1]):
            continue
        pairs = [(a, b) for a, b in _equalities(n.condition().get())
                 if "Literal" not in (a.getClass().getSimpleName(), b.getClass().getSimpleName())]  # a filter
        if pairs:
            keys.append([_column_type(left, sides[0] | sides[1], columns) for left, _ in pairs])
            names.append(([_column_name(a) for a, _ in pairs], [_column_name(b) for _, b in pairs]))
    return streams, keys, names
