"""Issue 42, done when: one entry per supported Spark line (``line_matrix.py`` says what an entry
does and checks); this file runs the two ends, 3.5 (Scala 2.12, no ordered read) and 4.3, whose
lakes the cross-line test reads: the lake written on 3.5 is joined colocated and verified by 4.3 and
joined by 4.2 (this side's own pyspark), the 4.3 one joined and verified by 3.5. 4.0, 4.1 and 4.2
have a file each (test_line_matrix_4_*.py), so that two test workers share the entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_colocate.core.spark_lines import LINES
from line_matrix import DOCTOR_LINE, MATRIX_FILES, check_cross, check_doctor, check_entry, lines_of
from line_testing import lines_under_test

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.mark.parametrize("line", lines_of(__file__))
def test_a_dag_writes_joins_repairs_and_verifies_on_the_line(line, line_entry):
    check_entry(line_entry(line))


def test_doctor_names_the_line_its_jar_and_the_executors_python(line_entry):
    """``colocate doctor --master`` on a cluster of another line than this side's pyspark: the line
    from that line's spark-submit on PATH, the jar a job would ship there, and what its executors
    run. One line (3.5, the other Scala) is enough: the same code serves every line."""
    if DOCTOR_LINE not in lines_under_test():
        pytest.skip(f"doctor's cross-line probe is checked on {DOCTOR_LINE}, not under test in this run")
    check_doctor(line_entry(DOCTOR_LINE))


def test_a_lake_written_on_one_line_is_read_and_verified_on_another(line_entry, tmp_path, monkeypatch):
    check_cross(line_entry, tmp_path, monkeypatch)


def test_every_line_has_a_matrix_file():
    """A new line in ``core/spark_lines.py`` needs a file here that runs it."""
    files = {p.name for p in Path(__file__).parent.glob("test_line_matrix*.py")}
    assert set(MATRIX_FILES) == files
    assert sorted(line for lines in MATRIX_FILES.values() for line in lines) == sorted(LINES)
