"""The Spark driver runs a plan and nothing else: it never loads the catalog (SQLAlchemy, Alembic)
nor Airflow, so a job runs on any cluster node with PySpark and this package, and cannot reach
the catalog even by accident. Checked in fresh interpreters: this test process has loaded both."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import make_plan, read_table

from airflow_colocate.core.contract import JoinPlan, JoinReport, Source
from airflow_colocate.spark.write_job import run_write
from airflow_colocate.storage.plan_files import load_report, save_plan

FORBIDDEN = ("sqlalchemy", "alembic", "airflow")
LOADED = f"sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})"
JOB_MODULES = ["entry", "write_job", "clone_job", "join_job"]


def fresh_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("module", JOB_MODULES)
def test_importing_a_job_loads_no_catalog(module):
    out = fresh_python(f"import sys, json; import airflow_colocate.spark.{module}; print(json.dumps({LOADED}))")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_what_a_job_imports_while_it_runs_loads_no_catalog():
    """The modules the jobs import lazily on the driver (session, registration, placement, the join
    prediction) are as clean as the job modules."""
    modules = ["airflow_colocate.spark." + m for m in JOB_MODULES] + [
        "airflow_colocate.spark.session", "airflow_colocate.spark.register", "airflow_colocate.spark.physical_plan",
        "airflow_colocate.storage.place", "airflow_colocate.planner.join", "airflow_colocate.core.sqltypes",
        "airflow_colocate.core.naming",
    ]
    out = fresh_python(f"import sys, json; import {', '.join(modules)}; print(json.dumps({LOADED}))")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.spark
def test_a_join_into_a_table_runs_without_the_catalog(spark, tmp_path):
    """A whole job on a fresh driver: a colocated join of two written tables, written into a third
    table (so register, plan proof, write and placement all run); the catalog never loads."""
    (tmp_path / "o").mkdir()
    (tmp_path / "l").mkdir()
    pq.write_table(pa.table({"o_key": pa.array(range(200), pa.int64())}), tmp_path / "o" / "o.parquet")
    pq.write_table(pa.table({"l_key": pa.array([k // 2 for k in range(400)], pa.int64()),
                             "l_qty": pa.array([k % 7 for k in range(400)], pa.int32())}), tmp_path / "l" / "l.parquet")
    orders = make_plan(tmp_path, source=Source(format="parquet", path=(tmp_path / "o").as_uri()),
                       columns=[["o_key", "bigint"], ["dt", "date"]], dist_cols=["o_key"], table="orders",
                       table_id=1, bucket_num=2, replication=1)
    lines = make_plan(tmp_path, source=Source(format="parquet", path=(tmp_path / "l").as_uri()),
                      columns=[["l_key", "bigint"], ["l_qty", "int"], ["dt", "date"]], dist_cols=["l_key"],
                      table="lines", table_id=2, bucket_num=2, replication=1)
    tables = [read_table(orders, "orders", reports=run_write(spark, orders)),
              read_table(lines, "lines", reports=run_write(spark, lines))]
    query = "SELECT o.o_key, l.l_qty FROM orders o JOIN lines l ON o.o_key = l.l_key"
    output = make_plan(tmp_path, source=Source(query=query, tables=tables), columns=[["o_key", "bigint"], ["l_qty", "int"]],
                       dist_cols=["o_key"], partition_cols=[], value="all", table="pairs", table_id=3, bucket_num=2)
    plan = JoinPlan(job_id="j1", query=query, tables=tables, reasons={"orders": "", "lines": ""},
                    groups={"orders": "1.1", "lines": "1.1"}, require_colocate=True,
                    report_uri=(tmp_path / "j1" / "report.json").as_uri(), output=output)
    plan_path = save_plan(plan, tmp_path / "j1" / "plan.json")

    code = ("import sys, json; from airflow_colocate.spark import entry; "
            "rc = entry.main(['--plan', sys.argv[1], '--master', 'local[1]']); "
            f"print(json.dumps({LOADED})); sys.exit(rc)")
    out = fresh_python(code, str(plan_path), timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    report = load_report(JoinReport, tmp_path / "j1" / "report.json")
    assert report.rows == 400 and report.write.source_rows == 400
    assert report.joins and all(j.colocate for j in report.joins)
    assert sum(r.rows for r in report.write.replicas) == 2 * 400  # two replicas of every bucket
