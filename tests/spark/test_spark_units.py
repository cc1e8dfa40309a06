"""The write job's and registration's pure parts (no Spark session)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.planner.contract import ReadPartition, ReadTable, Source
from airflow_colocate.spark import write_job
from airflow_colocate.spark.register import create_statements
from airflow_colocate.spark.write_job import check_plan, staged_buckets, widening_ok
from spark_helpers import make_plan


@pytest.mark.parametrize(
    "src, dst",
    [
        ("bigint", "bigint"), ("long", "bigint"), ("tinyint", "smallint"), ("tinyint", "bigint"),
        ("int", "bigint"), ("float", "double"), ("int", "decimal(10,0)"), ("bigint", "decimal(21,2)"),
        ("tinyint", "decimal(3,0)"), ("decimal(9,1)", "decimal(12,2)"), ("decimal(5,2)", "decimal(5,2)"),
        ("date", "timestamp"), ("void", "string"),
    ],
)
def test_safe_widenings(src, dst):
    assert widening_ok(src, dst)


@pytest.mark.parametrize(
    "src, dst",
    [
        ("bigint", "int"), ("double", "float"), ("double", "bigint"), ("int", "decimal(9,0)"),
        ("bigint", "decimal(20,2)"), ("decimal(12,2)", "decimal(12,3)"), ("decimal(12,2)", "decimal(11,2)"),
        ("int", "string"), ("date", "string"), ("string", "int"), ("timestamp", "date"), ("int", "double"),
        ("array<int>", "string"),
    ],
)
def test_refused_conversions(src, dst):
    assert not widening_ok(src, dst)


def test_staged_buckets_by_task_index(tmp_path):
    for name in [
        "part-00003-abc-c000.snappy.parquet", "part-00003-abc-c001.snappy.parquet",
        "part-00000-abc-c000.snappy.parquet", "_SUCCESS", ".part-00000-abc-c000.snappy.parquet.crc",
    ]:
        (tmp_path / name).write_bytes(b"")
    got = staged_buckets(tmp_path.as_uri(), 4)
    assert sorted(got) == [0, 3] and len(got[3]) == 2
    with pytest.raises(ColocateError, match="only 2 buckets"):
        staged_buckets(tmp_path.as_uri(), 2)


def test_check_plan_refuses_malformed_plans(tmp_path):
    cols = [["k", "bigint"], ["dt", "date"]]
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=cols, dist_cols=["k"], bucket_num=4)
    check_plan(plan)
    plan.buckets.pop()
    with pytest.raises(ColocateError, match="exactly one target per bucket"):
        check_plan(plan)
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=cols, dist_cols=["dt"], bucket_num=4)
    with pytest.raises(ColocateError, match="distribution columns"):
        check_plan(plan)
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=cols, dist_cols=["k"], mode="upsert")
    with pytest.raises(ColocateError, match="mode"):
        check_plan(plan)


def test_create_statements():
    table = ReadTable(
        name="orders", columns=[["o_key", "bigint"], ["dt", "date"], ["v", "string"]], dist_cols=["o_key"],
        partition_cols=["dt"], bucket_num=3,
        partitions=[ReadPartition("2026-11-01", ["file:///a/b0", "", "file:///a/b2"])],
    )
    create, alter, view = create_statements(table, "file:///tmp/e")[1:]
    assert "PARTITIONED BY (`dt`, `__bucket`) CLUSTERED BY (`o_key`) INTO 3 BUCKETS" in create
    assert create.index("`v` string") < create.index("`dt` date")  # partition columns come last
    assert alter.count("PARTITION (") == 2 and "`__bucket` = 1" not in alter
    assert "`__bucket` = 2) LOCATION 'file:///a/b2'" in alter
    assert view == "CREATE OR REPLACE TEMP VIEW `orders` AS SELECT `o_key`, `dt`, `v` FROM `__cl_orders`"
    table.bucketed = False
    assert "CLUSTERED" not in create_statements(table, "file:///tmp/e")[1]


def test_job_file_runs_as_a_script():
    """spark-submit runs the file by path: absolute imports and the __main__ guard must work."""
    path = Path(write_job.__file__)
    out = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--plan" in out.stdout
