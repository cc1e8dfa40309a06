"""The write job's, the entry's and registration's pure parts (no Spark session); the widening rules
are tested in tests/core/test_sqltypes.py."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from spark_helpers import make_plan

from airflow_colocate.core.contract import (
    ClonePlan,
    ReadPartition,
    ReadTable,
    Source,
)
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.operators.spark_env import job_path
from airflow_colocate.spark import entry
from airflow_colocate.spark.register import create_statements
from airflow_colocate.spark.write_job import check_plan
from airflow_colocate.storage.place import staged_buckets
from airflow_colocate.storage.plan_files import save_plan


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
    table.bucket_guard = False  # the guarded view: tests/joins/test_bucket_guard.py
    create, alter, view = create_statements(table, "file:///tmp/e")[1:]
    assert "PARTITIONED BY (`dt`, `__bucket`) CLUSTERED BY (`o_key`) INTO 3 BUCKETS" in create
    assert create.index("`v` string") < create.index("`dt` date")  # partition columns come last
    assert alter.count("PARTITION (") == 2 and "`__bucket` = 1" not in alter
    assert "`__bucket` = 2) LOCATION 'file:///a/b2'" in alter
    assert view == "CREATE OR REPLACE TEMP VIEW `orders` AS SELECT `o_key`, `dt`, `v` FROM `colocate_registered`.`__cl_orders`"
    table.bucketed = False
    assert "CLUSTERED" not in create_statements(table, "file:///tmp/e")[1]


def test_entry_is_the_one_application():
    """spark-submit runs entry.py by path (absolute imports, the __main__ guard); the job modules
    are not applications (adding a kind is a JOBS entry plus its module)."""
    out = subprocess.run([sys.executable, job_path(), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--plan" in out.stdout and "--kind" in out.stdout
    for module in ("write_job", "clone_job", "join_job", "verify_job", "import_job"):
        assert "__main__" not in Path(entry.__file__).with_name(f"{module}.py").read_text(), module


def test_every_kind_dispatches_to_its_run_function():
    assert list(entry.JOBS) == ["write", "clone", "join", "verify", "import"]
    for kind, (plan_class, _) in entry.JOBS.items():
        assert plan_class.kind == kind
        assert entry.runner(kind).__name__ == f"run_{kind}"
        assert entry.runner(kind).__module__ == f"airflow_colocate.spark.{kind}_job"
    with pytest.raises(ColocateError, match="unknown plan kind 'vacuum'"):
        entry.runner("vacuum")


# ---------------------------------------------------------------------- the shared entry


@pytest.mark.parametrize("how", ["main(kind=...)", "--kind"])
def test_entry_refuses_a_plan_of_another_kind_before_starting_spark(tmp_path, capsys, how):
    plan = make_plan(tmp_path, source=Source(format="parquet", path="/x"), columns=[["k", "bigint"]], dist_cols=["k"],
                     partition_cols=[], value="all")
    plan_path = save_plan(plan, tmp_path / "plan.json")
    if how == "--kind":
        assert entry.main(["--plan", str(plan_path), "--kind", "clone"]) == 2
    else:
        assert entry.main(["--plan", str(plan_path)], kind="clone") == 2
    line = f"{plan_path} is a 'write' plan, not a clone plan"
    assert f"colocate-clone: FAILED: {line}" in capsys.readouterr().out
    assert Path(plan.report_uri.removeprefix("file://") + ".error").read_text() == line  # what the operator raises
    assert not Path(plan.report_uri.removeprefix("file://")).exists()
    assert logging.getLogger("airflow_colocate").handlers == []  # the application's handler went with it


def test_entry_refuses_unreadable_and_unknown_plans(tmp_path, capsys):
    assert entry.main(["--plan", str(tmp_path / "nope.json")]) == 2
    assert "cannot read plan" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{not json")
    assert entry.main(["--plan", str(tmp_path / "bad.json")]) == 2
    assert "cannot read plan" in capsys.readouterr().out
    report = tmp_path / "r.json"
    (tmp_path / "odd.json").write_text(json.dumps({"kind": "vacuum", "report_uri": report.as_uri()}))
    assert entry.main(["--plan", str(tmp_path / "odd.json")]) == 2
    assert (tmp_path / "r.json.error").read_text() == (
        f"{tmp_path / 'odd.json'} is not a job plan (kind 'vacuum'; expected one of write, clone, join, verify, import)")
    (tmp_path / "short.json").write_text(json.dumps({"kind": "clone", "report_uri": report.as_uri()}))
    assert entry.main(["--plan", str(tmp_path / "short.json")]) == 2
    assert (tmp_path / "r.json.error").read_text().startswith(f"{tmp_path / 'short.json'} is not a valid clone plan: ")


def test_failure_line_is_one_line():
    plan = ClonePlan(job_id="c1", copies=[], report_uri="file:///r.json")
    assert entry.failure_line(plan, ColocateError("source x\n  is gone")) == "source x is gone"
    assert entry.failure_line(plan, OSError("disk full")) == "clone job c1 failed: OSError: disk full"
    assert entry.failure_line(plan, RuntimeError("")) == "clone job c1 failed: RuntimeError:"
    assert "\n" not in entry.failure_line(plan, ValueError("a\nb\n\nc"))
