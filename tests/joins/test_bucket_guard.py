"""The on-read bucket guard (issue 13): every registered view checks each row's
``pmod(hash(dist cols), n)`` against its bucket and every parquet page's checksum, without costing
what makes a join colocated: no Exchange under the join, partition pruning on the partition column.
(What it stops, on tampered replicas: tests/balance/test_verify.py.)"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from airflow_colocate.core.contract import ReadPartition, ReadTable
from airflow_colocate.jobs.join import prepare_join
from airflow_colocate.spark.join_job import run_join
from airflow_colocate.spark.register import create_statements, name_the_replica

pytestmark = pytest.mark.spark

DAY = "2026-11-01"


def test_guard_statements():
    table = ReadTable(name="orders", columns=[["o_key", "bigint"], ["dt", "date"], ["v", "string"]],
                      dist_cols=["o_key"], partition_cols=["dt"], bucket_num=3, table="sales.orders",
                      partitions=[ReadPartition(DAY, ["file:///a/b0", "", "file:///a/b2"])])
    create, _, view = create_statements(table, "file:///tmp/e")[1:]
    assert create.endswith("LOCATION 'file:///tmp/e' OPTIONS ('parquet.page.verify-checksum.enabled' = 'true')")
    assert view.startswith("CREATE OR REPLACE TEMP VIEW `orders` AS SELECT `o_key`, `dt`, `v` FROM `colocate_registered`.`__cl_orders` WHERE "
                           "CASE WHEN pmod(hash(`o_key`), 3) = `__bucket` THEN true ELSE raise_error(concat(")
    assert "'colocate: table sales.orders', ' partition ', cast(`dt` AS STRING)" in view
    assert "_metadata" not in view and "input_file_name" not in view  # per-row cost; nondeterministic: no pushdown
    table.bucketed = False  # the fallback reads guarded too: a wrong file is wrong rows there as well
    assert create_statements(table, "file:///tmp/e")[-1] == view
    table.bucket_guard = False
    create, _, view = create_statements(table, "file:///tmp/e")[1:]
    assert "OPTIONS" not in create and "WHERE" not in view
    odd = ReadTable(name="t", columns=[["k", "int"], ["_metadata", "string"]], dist_cols=["k"], partition_cols=[],
                    bucket_num=2, partitions=[ReadPartition("", ["file:///a/b0", "file:///a/b1"])])
    view = create_statements(odd, "file:///tmp/e")[-1]
    assert "pmod(hash(`k`), 2) = `__bucket`" in view and "_metadata.file_path" not in view


def scans(physical_plan: str) -> list[str]:
    return [line for line in physical_plan.splitlines() if "FileScan" in line and "__cl_" in line]


@pytest.mark.parametrize("disabled", [False, True], ids=["colocated", "fallback"])
def test_guarded_join_keeps_no_exchange_and_pruning(spark, tpch_catalog, plain, tmp_path, disabled):
    q = ("SELECT o.o_orderpriority, count(*) AS n, sum(l.l_extendedprice) AS revenue FROM {o} o "
         "JOIN {l} l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey "
         "JOIN {n} n ON n.dt = o.dt AND n.n_orderkey = o.o_orderkey "
         f"WHERE o.dt = DATE'{DAY}' GROUP BY o.o_orderpriority")
    ours = q.format(o="orders", l="lineitem", n="notes")
    everything = {"orders": None, "lineitem": None, "notes": None}  # both days registered: pruning must pick one
    plan, _ = prepare_join(tpch_catalog, ours, everything, work_dir=tmp_path, disable_colocate_join=disabled)
    assert all(t.bucket_guard for t in plan.tables) and all(t.bucketed != disabled for t in plan.tables)
    report = run_join(spark, plan)
    assert len(report.joins) == 2
    for j in report.joins:
        assert j.planned == (j.exchanges_left + j.exchanges_right == 0) == j.colocate == (not disabled), j
    # the guard ran: as Spark's filter, or folded into the columnar merge join (on by default), which
    # applies it on the vectors and says so
    if disabled:
        assert "raise_error" in report.physical_plan
    else:
        assert ("ColocateColumnarMergeJoin" in report.physical_plan
                and "filters: bucket guard" in report.physical_plan) or "raise_error" in report.physical_plan
    found = scans(report.physical_plan)
    assert len(found) == 3
    for line in found:  # the WHERE on o.dt reached every table's partition filters (dt = l.dt = n.dt)
        (filters,) = re.findall(r"PartitionFilters: \[([^\]]*)\]", line)
        assert f"= {DAY})" in filters, line
    mine = spark.sql(ours)
    ref = spark.sql(q.format(o="ref_orders", l="ref_lineitem", n="ref_notes"))
    assert mine.count() == ref.count() == report.rows
    assert mine.exceptAll(ref).count() == 0 and ref.exceptAll(mine).count() == 0


def test_the_guards_message_names_the_replica_the_job_registered():
    """The view's message names table, partition and bucket (no per-row file column); the join job
    inserts the directory it registered for that bucket, so the one line says which replica."""
    table = ReadTable(name="orders", columns=[["o_key", "bigint"], ["dt", "date"]], dist_cols=["o_key"],
                      partition_cols=["dt"], bucket_num=3, table="sales.orders",
                      partitions=[ReadPartition("2026-10-31", ["file:///a/b0", "", "file:///a/b2"]),
                                  ReadPartition(DAY, ["file:///c/b0", "", "file:///c/b2"])])
    raised = (f"org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] colocate: table sales.orders partition "
              f"{DAY} bucket 2 holds a row of bucket 1 (a corrupt replica): the query stops instead of returning wrong "
              "rows; run 'colocate verify' to mark it bad and 'colocate balance' to repair it SQLSTATE: P0001\n\tat x")
    named = name_the_replica(raised, [table])
    assert named.startswith(f"colocate: table sales.orders partition {DAY} bucket 2 (replica file:///c/b2) holds a row "
                            "of bucket 1 (a corrupt replica)"), named
    assert named.endswith("'colocate balance' to repair it") and "SQLSTATE" not in named
    unpartitioned = replace(table, partition_cols=[], partitions=[ReadPartition("", ["file:///u/b0", "file:///u/b1", ""])])
    assert "bucket 1 (replica file:///u/b1) holds" in name_the_replica(
        "colocate: table sales.orders bucket 1 holds a row of bucket 0 (a corrupt replica)", [unpartitioned])
    assert name_the_replica("[FAILED_READ_FILE] could not verify page integrity", [table]) is None
