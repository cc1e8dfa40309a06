"""Spark 4.1's entry of the line matrix (``line_matrix.py``): a file of its own, so that the two
test workers share the five entries."""

from __future__ import annotations

import pytest

from line_matrix import check_entry, lines_of

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.mark.parametrize("line", lines_of(__file__))
def test_a_dag_writes_joins_repairs_and_verifies_on_the_line(line, line_entry):
    check_entry(line_entry(line))
