"""Read Spark's plans: which joins have Exchange nodes feeding them, from which tables, and
on which columns of which tables they join.

This is the proof of a colocated join: the planner decides how tables are registered and predicts,
from the join keys read here, which joins need no shuffle; Spark decides whether to shuffle, and
this module reports what it decided, so the two can be compared.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark import locality
from airflow_colocate.spark.connect import is_connect, physical_plan_text
from airflow_colocate.spark.register import BACKING_PREFIX

EXCHANGES = {"ShuffleExchangeExec", "BroadcastExchangeExec", "ReusedExchangeExec"}
STAGES = {"ShuffleQueryStageExec", "BroadcastQueryStageExec", "TableCacheQueryStageExec", "ResultQueryStageExec"}
_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # session -> {(query, columns): query_shape}


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
    """Every join node of ``df``'s physical plan, innermost first (on Spark Connect, read from the
    plan's text: :func:`joins_of_text`)."""
    if is_connect(df.sparkSession):
        return joins_of_text(physical_plan_text(df))
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
    return physical_plan_text(df)


ORDERED_NODE = "ColocateOrderedBucket"  # AssertOrderedExec's node name (java/.../colocate/ordered)
COLUMNAR_NODE = "ColocateColumnarMergeJoin"  # ColumnarMergeJoinExec's (spark.colocate.join.columnar)


def final_plan(text: str) -> str:
    """An adaptive plan's text without its initial plan (which still shows the sorts the ordered read
    replaces when the stages are created), cut at its least indented markers (a subquery's lie deeper)."""
    marks = re.findall(r"^([ :+-]*)== (Final|Current|Initial) Plan ==", text, re.M) or [("", "")]
    top, phase = min(marks, key=lambda m: len(m[0]))
    if phase != "Final":  # no adaptive plan, or one not final yet (its Current Plan): the text as it is
        return text
    return re.split(rf"^{re.escape(top)}== (?:Final|Initial) Plan ==.*$", text, flags=re.M)[1]


def ordered_reads(spark, df, text: str) -> str:
    """One line on how the plan orders the colocated buckets for its merge joins: read in key order
    (no sort, each row checked) or sorted by Spark. ``text``: ``df``'s plan text, which the caller
    builds once (tens of ms at a few long guard expressions). When the job ran ``df`` through a
    write, its own adaptive plan is never final: the jar's rule is then applied to its initial plan
    here, as the adaptive planner does when it creates the stages. A Spark Connect client sees only
    the plan before it runs, which shows the sorts the rule removes later: it says so instead."""
    if is_connect(spark):
        where = "on" if locality.ordered_read(spark) else "off (the server has not loaded the jar's extension)"
        return (f"bucket reads: order not shown to a Spark Connect client (its explain is the plan before it runs); "
                f"the ordered read is {where}")
    if "isFinalPlan=false" in text and locality.ordered_read(spark):
        try:
            initial = df._jdf.queryExecution().executedPlan().initialPlan()
            rule = spark._jvm.colocate.ordered.ColumnarJoinRule(spark._jvm.colocate.ordered.SkipSortedSort())
            text = str(rule.apply(initial).toString())
        except Exception:  # noqa: BLE001 - a line for the log; the query itself is unaffected
            pass
    text = final_plan(text)
    ordered = text.count(f"{ORDERED_NODE} [")
    sorts = sum(1 for line in text.splitlines() if line.lstrip(" :+-*()0123456789").startswith("Sort ["))
    line = f"bucket reads: {ordered} in key order (no sort, order checked per row), {sorts} sorted by Spark"
    columnar = text.count(f"{COLUMNAR_NODE} [")  # which join ran: the plan before running still shows Spark's
    return line + (f"; {columnar} merge join(s) on column batches ({COLUMNAR_NODE})" if columnar else "")


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
    Raises whatever Spark's parser raises (the caller keeps its choice); on Spark Connect, which has no
    parser to call, a ColocateError."""
    if is_connect(spark):
        raise ColocateError("a Spark Connect client cannot parse a query without running it")
    # A function of the text and columns (and of which names aggregate): parsed and walked once a session
    key, shapes = (query, repr(sorted((t, sorted(c.items())) for t, c in columns.items()))), _SHAPES.setdefault(spark, {})
    if key not in shapes:
        if len(shapes) >= 64:
            shapes.clear()
        shapes[key] = _query_shape(spark, query, columns)
    streams, keys, names = shapes[key]  # copies: the caller may change its lists
    return streams, [list(k) for k in keys], [(list(a), list(b)) for a, b in names]


def _query_shape(spark, query: str, columns: dict[str, dict[str, str]]):
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


# ------------------------------------------------------------------ the plan's text (Spark Connect)
# A Connect client has no JVM plan to walk: the same reading from the explain text, whose lines are
# the plan's nodes indented three columns a level (``:- `` / ``+- `` before a child).

_NODE_PREFIX = " :+-"
_CODEGEN = re.compile(r"^\*\(\d+\)\s*")
_ATTR = re.compile(r"^`?(?P<name>[^#`]+?)`?#(?P<id>\d+)L?$")


@dataclass
class _Text:
    name: str
    line: str
    children: list[_Text] = field(default_factory=list)


def _parse_tree(text: str) -> _Text | None:
    """The tree of a plan's explain text (lines that are no node, such as a header, are skipped)."""
    root, stack = None, []  # stack: (depth, node)
    for raw in text.splitlines():
        body = raw.lstrip(_NODE_PREFIX)
        if not body or body.startswith("=="):
            continue
        depth = (len(raw) - len(body)) // 3
        body = _CODEGEN.sub("", body)
        node = _Text(name=body.split(" ", 1)[0].split("(", 1)[0].split("[", 1)[0], line=body)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack and depth == stack[-1][0] + 1:
            stack[-1][1].children.append(node)
        elif root is None:
            root = node
        else:  # a second tree, or a subquery's plan (dynamic pruning's, a scalar one's) printed two levels
            continue  # under the node that uses it: not read, as the JVM walk does not see it as a child
        stack.append((depth, node))
    return root


def _split_top(text: str) -> list[str]:
    """``a, f(b, c), d`` -> [a, f(b, c), d]: commas outside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _bracket_groups(text: str) -> tuple[list[str], str]:
    """The ``[…]`` groups at the start of ``text`` (after the node name) and what follows them."""
    groups, i = [], 0
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i >= len(text) or text[i] != "[":
            return groups, text[i:]
        depth, start = 0, i
        while i < len(text):
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        groups.append(text[start + 1:i - 1])


def _text_attr(expr: str) -> int | None:
    m = _ATTR.match(expr.strip())
    return int(m["id"]) if m else None


def _text_scan(node: _Text) -> tuple[str | None, dict[int, str]]:
    """A file scan's table (the backing prefix dropped) and its output columns by attribute id."""
    rest = node.line[len(node.name):].strip()
    if node.name != "FileScan" or " " not in rest:
        return None, {}
    ident = rest.split(" ", 1)[1]
    name, _, cols = ident.partition("[")
    table = name.strip().split(".")[-1].strip("`").lower()
    table = table[len(BACKING_PREFIX):] if table.startswith(BACKING_PREFIX) else table
    columns = {}
    for expr in _split_top(cols.split("]", 1)[0]):
        m = _ATTR.match(expr)
        if m:
            columns[int(m["id"])] = m["name"]
    return table, columns


def _text_aliases(node: _Text, columns: dict[int, tuple[str, str]]) -> None:
    groups, _ = _bracket_groups(node.line[len(node.name):])
    for expr in _split_top(groups[0]) if groups else []:
        source, sep, alias = expr.rpartition(" AS ")
        if not sep:
            continue
        source = source.strip()
        if source.startswith("cast(") and " as " in source:  # a view's no-op cast to its own type
            source = source[len("cast("):].rsplit(" as ", 1)[0]
        sid, aid = _text_attr(source), _text_attr(alias)
        if sid is not None and aid is not None and sid in columns:
            columns[aid] = columns[sid]


_TEXT_EXCHANGES = {"Exchange", "BroadcastExchange", "ReusedExchange", "ShuffleExchange"}


def _text_side(node: _Text, joins: list[JoinNode]) -> Side:
    side, projects, stack = Side(), [], [node]
    while stack:
        n = stack.pop()
        if n.name in _TEXT_EXCHANGES:
            side.exchanges += 1
        if n.name == "Project":
            projects.append(n)
        if n.name.endswith("Join"):
            inner = _text_join(n, joins)
            side.tables += inner.left.tables + inner.right.tables
            side.columns.update(inner.left.columns)
            side.columns.update(inner.right.columns)
            side.carriers += [t for s in KEEPS.get(inner.kind, ()) for t in getattr(inner, s).carriers]
            continue
        table, columns = _text_scan(n)
        if table:
            side.tables.append(table)
            side.carriers.append(table)
            side.columns.update({i: (table, c) for i, c in columns.items()})
        stack.extend(n.children)
    for project in reversed(projects):
        _text_aliases(project, side.columns)
    return side


def _text_join(node: _Text, joins: list[JoinNode]) -> JoinNode:
    groups, rest = _bracket_groups(node.line[len(node.name):])
    kind = next((JOIN_KINDS[t] for t in _split_top(rest) if t in JOIN_KINDS), "other")  # a nested loop's: 2nd
    j = JoinNode(description=node.line[:200], left=Side(), right=Side(), kind=kind)
    joins.append(j)
    j.left = _text_side(node.children[0], joins) if node.children else Side()
    j.right = _text_side(node.children[1], joins) if len(node.children) > 1 else Side()
    if len(groups) >= 2:
        for lk, rk in zip(_split_top(groups[0]), _split_top(groups[1])):
            lid, rid = _text_attr(lk), _text_attr(rk)
            j.keys.append((j.left.columns.get(lid) if lid is not None else None,
                           j.right.columns.get(rid) if rid is not None else None))
    return j


def joins_of_text(text: str) -> list[JoinNode]:
    """:func:`joins_of` read from a plan's explain text (a Spark Connect client's only view of it)."""
    root = _parse_tree(final_plan(text))
    joins: list[JoinNode] = []
    stack = [root] if root is not None else []
    while stack:
        n = stack.pop()
        if n.name.endswith("Join"):
            _text_join(n, joins)
            continue
        stack.extend(n.children)
    return list(reversed(joins))
