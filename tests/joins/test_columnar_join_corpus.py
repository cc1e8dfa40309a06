"""Every shape of the query corpus (test_query_corpus.py) with the columnar bucket merge join
forced on (issue 32): the same rows as plain Spark, whichever joins the operator takes."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.spark.session import scoped
from test_query_corpus import CORPUS, NAMES, tables_of

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("query", [pytest.param(q, id=i) for i, q, _ in CORPUS])
def test_query_shape_with_the_columnar_join(spark, tpch_catalog, plain, query):
    ours = query.format(**NAMES)
    reference = query.format(**{k: f"ref_{v}" for k, v in NAMES.items()})
    expected = Counter(spark.sql(reference).collect())
    with scoped(spark, {"spark.colocate.join.columnar": "true"}):
        result = join_in_session(spark, tpch_catalog, ours, tables_of(query))
        mine = Counter(spark.sql(ours).collect())
    assert mine == expected and sum(expected.values()) == result["rows"]
