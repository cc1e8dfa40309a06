"""A Hive-enabled session is refused before anything is created (issue 27): on such a session every
table DDL is a write to the user's metastore, and registration creates backing tables. The
session is real (Spark's own Hive jars, a Derby metastore in a temporary folder), in a process of
its own because a JVM holds one catalog implementation for its life."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.spark

SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from airflow_colocate.core.contract import ReadPartition, ReadTable
    from airflow_colocate.core.errors import ColocateError
    from airflow_colocate.spark.register import DATABASE, register_tables

    home = sys.argv[1]
    spark = (SparkSession.builder.master("local[1]").appName("hive-session")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.warehouse.dir", f"{home}/warehouse")
             .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                     f"jdbc:derby:;databaseName={home}/metastore_db;create=true")
             .enableHiveSupport().getOrCreate())
    spark.sql("CREATE DATABASE IF NOT EXISTS sales")
    before = sorted(d.name for d in spark.catalog.listDatabases())
    table = ReadTable(name="orders", table="sales.orders", columns=[["id", "bigint"], ["dt", "date"]],
                      dist_cols=["id"], partition_cols=["dt"], bucket_num=2,
                      partitions=[ReadPartition(value="2026-11-01", bucket_paths=[f"{home}/b0", f"{home}/b1"])])
    try:
        register_tables(spark, [table])
        outcome = "registered"
    except ColocateError as exc:
        outcome = str(exc)
    after = sorted(d.name for d in spark.catalog.listDatabases())
    print(json.dumps({"catalog": spark.conf.get("spark.sql.catalogImplementation"), "outcome": outcome,
                      "before": before, "after": after, "ours": spark.catalog.databaseExists(DATABASE),
                      "views": [t.name for t in spark.catalog.listTables() if t.isTemporary]}))
    spark.stop()
""")


def test_a_hive_session_is_refused_and_its_metastore_left_alone(tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["catalog"] == "hive"
    assert "spark.sql.catalogImplementation=hive" in result["outcome"], result["outcome"]
    assert "in your metastore" in result["outcome"]
    assert result["after"] == result["before"] == ["default", "sales"]  # nothing created in the metastore
    assert result["ours"] is False and result["views"] == []
