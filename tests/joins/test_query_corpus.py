"""Any SQL Spark accepts is planned: aliases in any case, quoting, CTEs, subqueries, self-joins,
every join type, TPC-H shapes and the seeds' own benchmark queries. Each query returns exactly the
rows plain Spark returns over the source files, and the planner's prediction agrees with Spark's
plan join by join (issue 13: the seeds' SQL1 with ``FROM A A JOIN B B`` crashed the planner).

``{o}``, ``{l}``, ``{n}``, ``{f}``, ``{c}`` stand for orders, lineitem, notes (one group with the first
two), flags (not in a group) and customer (bucketed alone); the reference run replaces them with
plain views over the same files. Aliases are written literally, so ``{o} ORDERS`` is the alias
``ORDERS`` on both runs.
"""

from __future__ import annotations

import pytest

from collections import Counter

from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.spark.join_job import DPP_CONF, planned_joins
from airflow_colocate.spark.physical_plan import joins_of, joins_of_text, plan_text
from airflow_colocate.spark.session import scoped
from test_joins import TWO_DAYS

pytestmark = pytest.mark.spark

KEY = "{o}.dt = {l}.dt AND {o}.o_orderkey = {l}.l_orderkey"

# (id, query, colocated?) -- True: every join must be colocated; None: whatever the rule says.
CORPUS = [
    ("plain-aliases", "SELECT o.o_orderkey, l.l_linenumber FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey", True),
    ("upper-aliases", "SELECT O.O_ORDERKEY, L.L_LINENUMBER FROM {o} O JOIN {l} L ON O.DT = L.DT AND O.O_ORDERKEY = L.L_ORDERKEY", True),
    ("alias-is-table-name-other-case", "SELECT ORDERS.o_orderkey FROM {o} ORDERS JOIN {l} LINEITEM ON ORDERS.dt = LINEITEM.dt AND ORDERS.o_orderkey = LINEITEM.l_orderkey", True),
    ("alias-is-table-name", "SELECT count(*) AS n FROM {o} orders JOIN {l} lineitem ON orders.dt = lineitem.dt AND orders.o_orderkey = lineitem.l_orderkey", True),
    ("no-aliases", "SELECT {o}.o_orderkey, {l}.l_quantity FROM {o} JOIN {l} ON " + KEY, True),
    ("backquoted", "SELECT `o`.`o_orderkey` FROM `{o}` AS `o` JOIN `{l}` AS `l` ON `o`.`dt` = `l`.`dt` AND `o`.`o_orderkey` = `l`.`l_orderkey`", True),
    ("keys-reversed", "SELECT o.o_orderkey FROM {o} o JOIN {l} l ON l.l_orderkey = o.o_orderkey AND l.dt = o.dt", True),
    ("comma-join", "SELECT o.o_orderkey, l.l_linenumber FROM {o} o, {l} l WHERE o.dt = l.dt AND o.o_orderkey = l.l_orderkey", True),
    ("key-only-no-dt", "SELECT o.o_orderkey, l.l_linenumber FROM {o} o JOIN {l} l ON o.o_orderkey = l.l_orderkey", None),
    ("cte", "WITH big AS (SELECT * FROM {o} WHERE o_totalprice > 100000) SELECT big.o_orderkey, l.l_quantity FROM big JOIN {l} l ON big.dt = l.dt AND big.o_orderkey = l.l_orderkey", True),
    ("cte-named-like-table", "WITH LINEITEM AS (SELECT * FROM {l} WHERE l_quantity > 10) SELECT o.o_orderkey FROM {o} o JOIN LINEITEM ON o.dt = LINEITEM.dt AND o.o_orderkey = LINEITEM.l_orderkey", True),
    ("subquery-renamed-key", "SELECT x.k, l.l_linenumber FROM (SELECT o_orderkey AS k, dt FROM {o}) x JOIN {l} l ON x.dt = l.dt AND x.k = l.l_orderkey", True),
    ("both-sides-aggregated", "SELECT o.o_orderkey, x.q FROM {o} o JOIN (SELECT l_orderkey, dt, sum(l_quantity) AS q FROM {l} GROUP BY l_orderkey, dt) x ON o.dt = x.dt AND o.o_orderkey = x.l_orderkey", None),
    ("self-join", "SELECT a.o_orderkey FROM {o} a JOIN {o} b ON a.dt = b.dt AND a.o_orderkey = b.o_orderkey WHERE a.o_totalprice > b.o_totalprice - 1", True),
    ("self-join-upper", "SELECT A.o_orderkey FROM {o} A JOIN {o} B ON A.dt = B.dt AND A.o_orderkey = B.o_orderkey", True),
    ("left", "SELECT o.o_orderkey, l.l_linenumber FROM {o} o LEFT JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey AND l.l_quantity > 45", True),
    ("right", "SELECT o.o_orderkey, l.l_linenumber FROM {o} o RIGHT JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey AND o.o_totalprice > 200000", True),
    ("full", "SELECT o.o_orderkey, l.l_linenumber FROM {o} o FULL OUTER JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey AND l.l_quantity > 45", True),
    ("semi", "SELECT o.o_orderkey FROM {o} o LEFT SEMI JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey AND l.l_quantity > 45", True),
    ("anti", "SELECT o.o_orderkey FROM {o} o LEFT ANTI JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey AND l.l_quantity > 45", True),
    ("exists", "SELECT o.o_orderkey FROM {o} o WHERE EXISTS (SELECT 1 FROM {l} l WHERE l.dt = o.dt AND l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate)", None),
    ("not-exists", "SELECT o.o_orderkey FROM {o} o WHERE NOT EXISTS (SELECT 1 FROM {l} l WHERE l.dt = o.dt AND l.l_orderkey = o.o_orderkey AND l.l_quantity > 10)", None),
    ("in-subquery", "SELECT o.o_orderkey FROM {o} o WHERE o.o_orderkey IN (SELECT l_orderkey FROM {l} WHERE l_quantity > 49)", None),
    ("not-in-subquery", "SELECT o.o_orderkey FROM {o} o WHERE o.o_orderkey NOT IN (SELECT l_orderkey FROM {l} WHERE l_quantity > 45)", None),
    ("group-by-having", "SELECT o.o_orderpriority, count(*) AS n FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.o_orderpriority HAVING count(*) > 10", True),
    ("distinct", "SELECT DISTINCT o.o_orderstatus, l.l_shipmode FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey", True),
    ("order-by-limit", "SELECT o.o_orderkey, l.l_linenumber, l.l_extendedprice FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey ORDER BY l.l_extendedprice DESC, o.o_orderkey, l.l_linenumber LIMIT 50", True),
    ("window", "SELECT o.o_orderkey, l.l_linenumber, rank() OVER (PARTITION BY o.o_orderkey ORDER BY l.l_extendedprice DESC, l.l_linenumber) AS r FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey", True),
    ("union-all", "SELECT o.o_orderkey FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey WHERE l.l_quantity > 48 UNION ALL SELECT o.o_orderkey FROM {o} o JOIN {n} n ON o.dt = n.dt AND o.o_orderkey = n.n_orderkey WHERE o.o_totalprice > 400000", True),
    ("expression-key", "SELECT o.o_orderkey FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey + 0 = l.l_orderkey", None),
    ("non-key", "SELECT o.o_orderkey FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_custkey = l.l_linenumber", None),
    ("with-plain-table", "SELECT o.o_orderkey, f.f_flag FROM {o} o JOIN {f} f ON o.dt = f.dt AND o.o_orderkey = f.f_orderkey", None),
    ("with-other-bucketing", "SELECT o.o_orderkey, c.c_name FROM {o} o JOIN {c} c ON o.o_custkey = c.c_custkey", None),
    ("three-way", "SELECT count(*) AS n FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey JOIN {n} n ON o.dt = n.dt AND o.o_orderkey = n.n_orderkey", True),
    ("four-way-with-customer", "SELECT c.c_mktsegment, count(*) AS n FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey JOIN {n} n ON o.dt = n.dt AND o.o_orderkey = n.n_orderkey JOIN {c} c ON c.c_custkey = o.o_custkey GROUP BY c.c_mktsegment", None),
    # The seeds' benchmark (004): SQL1 and SQL2 over A, B, C joined on (dt, id), aliases = table names.
    ("seeds-sql1", "SELECT count(*) AS n FROM {o} ORDERS JOIN {l} LINEITEM ON ORDERS.dt = LINEITEM.dt AND ORDERS.o_orderkey = LINEITEM.l_orderkey JOIN {n} NOTES ON ORDERS.dt = NOTES.dt AND ORDERS.o_orderkey = NOTES.n_orderkey WHERE ORDERS.dt IN (DATE'2026-11-01', DATE'2026-11-02')", True),
    ("seeds-sql1-lower", "SELECT count(*) AS n FROM {o} orders JOIN {l} lineitem ON orders.dt = lineitem.dt AND orders.o_orderkey = lineitem.l_orderkey JOIN {n} notes ON orders.dt = notes.dt AND orders.o_orderkey = notes.n_orderkey WHERE orders.dt IN (DATE'2026-11-02')", True),
    ("seeds-sql2", "SELECT ORDERS.o_orderkey, LINEITEM.l_linenumber, NOTES.n_comment FROM {o} ORDERS JOIN {l} LINEITEM ON ORDERS.dt = LINEITEM.dt AND ORDERS.o_orderkey = LINEITEM.l_orderkey JOIN {n} NOTES ON ORDERS.dt = NOTES.dt AND ORDERS.o_orderkey = NOTES.n_orderkey ORDER BY 1, 2 LIMIT 1000", True),
    ("tpch-q3", "SELECT l.l_orderkey, sum(l.l_extendedprice) AS revenue, o.o_orderdate FROM {c} c JOIN {o} o ON c.c_custkey = o.o_custkey JOIN {l} l ON l.dt = o.dt AND l.l_orderkey = o.o_orderkey WHERE c.c_mktsegment = 'BUILDING' AND o.o_orderdate < DATE'1995-03-15' AND l.l_shipdate > DATE'1995-03-15' GROUP BY l.l_orderkey, o.o_orderdate ORDER BY revenue DESC, o.o_orderdate, l.l_orderkey LIMIT 10", None),
    ("tpch-q4", "SELECT o.o_orderpriority, count(*) AS n FROM {o} o WHERE EXISTS (SELECT * FROM {l} l WHERE l.dt = o.dt AND l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate) GROUP BY o.o_orderpriority", None),
    ("tpch-q12", "SELECT l.l_shipmode, sum(CASE WHEN o.o_orderpriority IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END) AS high, sum(CASE WHEN o.o_orderpriority NOT IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END) AS low FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey WHERE l.l_shipmode IN ('MAIL', 'SHIP') AND l.l_commitdate < l.l_receiptdate AND l.l_shipdate < l.l_commitdate GROUP BY l.l_shipmode", True),
    ("tpch-q13", "SELECT c_count, count(*) AS custdist FROM (SELECT c.c_custkey, count(o.o_orderkey) AS c_count FROM {c} c LEFT OUTER JOIN {o} o ON c.c_custkey = o.o_custkey GROUP BY c.c_custkey) GROUP BY c_count", None),
    ("tpch-q18", "SELECT o.o_orderkey, o.o_totalprice, sum(l.l_quantity) AS q FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey WHERE o.o_orderkey IN (SELECT l_orderkey FROM {l} GROUP BY l_orderkey HAVING sum(l_quantity) > 250) GROUP BY o.o_orderkey, o.o_totalprice", None),
    ("tpch-q21-like", "SELECT o.o_orderstatus, count(*) AS n FROM {o} o JOIN {l} l1 ON o.dt = l1.dt AND o.o_orderkey = l1.l_orderkey WHERE l1.l_receiptdate > l1.l_commitdate AND NOT EXISTS (SELECT 1 FROM {l} l3 WHERE l3.dt = l1.dt AND l3.l_orderkey = l1.l_orderkey AND l3.l_linenumber <> l1.l_linenumber AND l3.l_receiptdate > l3.l_commitdate) GROUP BY o.o_orderstatus", None),
]
NAMES = {"o": "orders", "l": "lineitem", "n": "notes", "f": "flags", "c": "customer"}


def tables_of(query: str) -> dict:
    return {NAMES[k]: (None if k == "c" else TWO_DAYS) for k in NAMES if "{" + k + "}" in query}


def test_corpus_has_at_least_forty_shapes():
    assert len(CORPUS) >= 40 and len({c[0] for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("query,colocated", [pytest.param(q, c, id=i) for i, q, c in CORPUS])
def test_query_shape(spark, tpch_catalog, plain, query, colocated):
    ours = query.format(**NAMES)
    reference = query.format(**{k: f"ref_{v}" for k, v in NAMES.items()})
    result = join_in_session(spark, tpch_catalog, ours, tables_of(query))
    # Compared as multisets in Python: the data is small, and two collects cost less than counts
    # and exceptAll both ways (this module runs 44 queries).
    mine, ref = Counter(spark.sql(ours).collect()), Counter(spark.sql(reference).collect())
    assert mine == ref and sum(ref.values()) == result["rows"]
    for j in result["joins"]:  # the planner's prediction is what Spark did, join by join
        assert j["planned"] == (j["exchanges_left"] + j["exchanges_right"] == 0) == j["colocate"], j
    if colocated:
        assert result["joins"] and result["colocate"] is True, result["explain"]
    with scoped(spark, {DPP_CONF: "false"}):  # as the join job plans a bucketed read: its joins from the
        df = spark.sql(ours)                  # plan's text are those of the JVM plan's walk
        assert planned_joins(df) == joins_of(df)


# The text reader against the JVM walk where the join job's own read (planned_joins) takes the walk
# instead, so the corpus above cannot reach it, though Spark Connect reads these from the text:
# a dynamic pruning subquery (printed under the scan it prunes, with joins and an adaptive plan of
# its own once run) and a nested loop anti join (its type after its build side).
TEXT_CASES = [
    ("dpp", "SELECT l.l_linenumber FROM {l} l JOIN (SELECT o.dt, o.o_orderkey FROM {o} o JOIN {n} n ON o.dt = n.dt "
            "AND o.o_orderkey = n.n_orderkey WHERE o.o_totalprice > 400000) x ON l.dt = x.dt", "dynamicpruning#"),
    ("nested-loop-anti", "SELECT o.o_orderkey FROM {o} o LEFT ANTI JOIN (SELECT * FROM {l} WHERE l_quantity > 49) l "
                         "ON o.o_orderkey < l.l_orderkey - 5900", "BroadcastNestedLoopJoin BuildRight, LeftAnti"),
]


@pytest.mark.parametrize("query,shown", [pytest.param(q, s, id=i) for i, q, s in TEXT_CASES])
def test_joins_read_from_the_text_are_those_of_the_walk(spark, tpch_catalog, query, shown):
    join_in_session(spark, tpch_catalog, query.format(**NAMES), tables_of(query))  # registers the views
    with scoped(spark, {DPP_CONF: "true", "spark.sql.autoBroadcastJoinThreshold": "10MB"}):  # DPP reuses a broadcast
        df = spark.sql(query.format(**NAMES))
        for ran in (False, True):  # the plan before it runs, and AQE's final plan after
            if ran:
                df.collect()
            text = plan_text(df)
            assert shown in text, text
            assert joins_of_text(text) == joins_of(df), text
