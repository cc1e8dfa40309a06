"""Issue 16 (3): a write task's log, as Airflow records it in a real ``dag.test()`` run with
spark-submit, is short at the default level and ends with our readable summary."""

from __future__ import annotations

import json
import re

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from colocate_testing import add_local_backends

pytestmark = pytest.mark.spark

DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_colocate.operators.write import ColocateWriteOperator

with DAG("colocate_task_log", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")):
    ColocateWriteOperator(task_id="load", table="events", source={source!r}, partition="{{{{ ds }}}}",
                          columns="id bigint, v string, dt date", dist_cols=["id"], bucket_num=4,
                          replication_num=2, partition_col="dt", colocate_with="g_log",
                          conf={{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}})
'''
# What Airflow's task logger records (the task's log file in a deployment): the task runner's own
# lines and every logger under airflow.task (operators, hooks, the spark-submit output).
TASK_LINE = re.compile(r"\[(task|airflow\.task[^\]]*)\]")
BUCKET_ROW = re.compile(r"\s*(?P<bucket>\d+)\s+(?P<rows>[\d,]+)\s+(?P<size>[\d.]+ (B|KiB))\s+(?P<backends>\S.*)")


@pytest.fixture
def lake(airflow_db, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    yield cat
    cat.dispose()


def test_write_task_log_is_short_and_ends_with_the_summary(lake, tmp_path, monkeypatch, capfd):
    from airflow.dag_processing.dagbag import DagBag

    source = tmp_path / "source"
    source.mkdir()
    pq.write_table(pa.table({"id": pa.array(range(2000), pa.int64()), "v": [f"value {i}" for i in range(2000)]}),
                   source / "part-0.parquet")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "log_dag.py").write_text(DAG_FILE.format(source=str(source)))
    monkeypatch.setattr("airflow.settings.DAGS_FOLDER", str(dags))  # read by the dags-folder bundle
    dag = DagBag(dag_folder=str(dags)).get_dag("colocate_task_log")
    capfd.readouterr()
    run = dag.test(logical_date=pendulum.datetime(2026, 11, 21, tz="UTC"))
    out, err = capfd.readouterr()
    assert run.state == "success", out[-3000:]

    task_lines = [line for line in (out + err).splitlines() if TASK_LINE.search(line)]
    ours = [re.sub(r"\s*\[airflow\.task.*$", "", line.split("colocate: ", 1)[1])
            for line in task_lines if "ColocateWriteOperator]" in line and "colocate: " in line]
    assert len(task_lines) <= 80, "\n".join(task_lines)
    # Spark applies spark.log.level once its context starts: only the context's first three lines
    # (version, OS, Java) come before it
    spark_info = [line for line in task_lines if "SparkSubmitHook" in line and " INFO " in line]
    assert len(spark_info) <= 3 and all("INFO SparkContext: " in line for line in spark_info), "\n".join(spark_info)

    # the summary is the last of our lines: the commit, the per-bucket table, the phases
    start = ours.index("---- summary ----")
    summary = ours[start + 1:]
    assert re.fullmatch(r"committed default\.events partition 2026-11-21 version 1 \(overwrite\): 2,000 rows, "
                        r"[\d.]+ KiB in 8 replicas of 4 buckets", summary[0]), summary[0]
    assert summary[1].split() == ["bucket", "rows", "size", "backends"]
    xcom = task_xcom(run, "load")
    expected = {}
    for r in xcom["buckets"]:  # one entry per replica
        expected.setdefault(r["bucket"], (r["rows"], set()))[1].add(r["backend"])
    names = {b.id: b.name for b in lake.backends()}
    table = [BUCKET_ROW.fullmatch(line) for line in summary[2:-1]]
    assert all(table) and len(table) == 4, summary
    for m in table:
        rows, backends = expected[int(m["bucket"])]
        assert int(m["rows"].replace(",", "")) == rows
        assert sorted(m["backends"].split(", ")) == sorted(names[b] for b in backends)
    assert sum(rows for rows, _ in expected.values()) == 2000
    assert re.fullmatch(r"elapsed: plan [\d.]+s, spark job [\d.]+s, commit [\d.]+s \(total [\d.]+s\)", summary[-1])
    assert set(xcom["elapsed"]) == {"plan", "spark job", "commit"}


def task_xcom(run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id,
                                                 key="return_value")).first()
        return XComModel.deserialize_value(row)
