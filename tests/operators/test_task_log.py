"""Issue 16 (3, 4, 9): a write task's log, as Airflow records it in a real ``dag.test()`` run with
spark-submit, is short at the default level and ends with our readable summary; the join task
after it ends with its explain and summary, keeps Spark's raw plan under its own XCom key and
emits its output table's Asset event."""

from __future__ import annotations

import json
import re

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.sqltypes import parse_columns

pytestmark = pytest.mark.spark

DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.write import ColocateWriteOperator

with DAG("colocate_task_log", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")):
    load = ColocateWriteOperator(task_id="load", table="events", source={source!r}, partition="{{{{ ds }}}}",
                          columns="id bigint, v string, dt date", dist_cols=["id"], bucket_num=4,
                          replication_num=2, partition_col="dt", colocate_with="g_log",
                          conf={{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}})
    pairs = ColocateJoinOperator(
        task_id="pairs", tables={{"events": ["{{{{ ds }}}}"]}}, output_table="event_pairs",
        query="SELECT e.v, count(*) AS n FROM events e JOIN events f ON e.dt = f.dt AND e.id = f.id GROUP BY e.v",
        conf={{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}})
    load >> pairs
'''
# What Airflow's task logger records (the task's log file in a deployment): the task runner's own
# lines and every logger under airflow.task (operators, hooks, the spark-submit output).
TASK_LINE = re.compile(r"\[(task|airflow\.task[^\]]*)\]")
BUCKET_ROW = re.compile(r"\s*(?P<bucket>\d+)\s+(?P<rows>[\d,]+)\s+(?P<size>[\d.]+ (B|KiB))\s+(?P<backends>\S.*)")


@pytest.fixture
def lake(airflow_db, colocate_env, monkeypatch):
    """The operators' catalog and backends (conftest), with spark-submit on one core."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    return colocate_env


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
    lake.tables.create("event_pairs", parse_columns("v string, n bigint"), ["v"], bucket_num=2)
    started = pendulum.now("UTC")
    capfd.readouterr()
    run = dag.test(logical_date=pendulum.datetime(2026, 11, 21, tz="UTC"))
    out, err = capfd.readouterr()
    assert run.state == "success", out[-3000:]

    both = [line for line in (out + err).splitlines() if TASK_LINE.search(line)]
    # each task's log ends with the task runner's "Pushing xcom" and "::endgroup::"
    end = next(i for i, line in enumerate(both) if "Pushing xcom" in line) + 2
    task_lines, join_lines = both[:end], both[end:]  # the write task's, the join task's
    assert "::endgroup::" in task_lines[-1] and not any("ColocateJoinOperator" in line for line in task_lines)
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
    names = {b.id: b.name for b in lake.backends.list()}
    table = [BUCKET_ROW.fullmatch(line) for line in summary[2:-1]]
    assert all(table) and len(table) == 4, summary
    for m in table:
        rows, backends = expected[int(m["bucket"])]
        assert int(m["rows"].replace(",", "")) == rows
        assert sorted(m["backends"].split(", ")) == sorted(names[b] for b in backends)
    assert sum(rows for rows, _ in expected.values()) == 2000
    assert re.fullmatch(r"elapsed: plan [\d.]+s, spark job [\d.]+s, commit [\d.]+s \(total [\d.]+s\)", summary[-1])
    assert set(xcom["elapsed"]) == {"plan", "spark job", "commit"}


    # the join task: its explain and result at the end, Spark's raw plan under its own XCom key,
    # and its output table's Asset event, as a write's
    joined = [re.sub(r"\s*\[airflow\.task.*$", "", line.split("colocate: ", 1)[1])
              for line in join_lines if "ColocateJoinOperator]" in line and "colocate: " in line]
    tail = joined[joined.index("---- summary ----") + 1:]
    assert re.fullmatch(r"join join-\d+: 2,000 result rows, colocated", tail[0]), tail
    assert tail[1] in ("join 1: SORT MERGE JOIN (INNER)", "join 1: HASH JOIN (INNER)") and "  tables: events ⋈ events" in tail
    # the explain once in the whole task log (the Spark job's own lines no longer repeat it)
    assert sum("join 1: " in line for line in join_lines) == 1, "\n".join(line for line in join_lines if "join 1: " in line)
    assert any(t.startswith("committed default.event_pairs partition all version 1") for t in tail)
    assert tail[-1].startswith("elapsed: plan ")
    assert any(re.fullmatch(r"inside the Spark job: register [\d.]+s, plan [\d.]+s, run [\d.]+s", t) for t in tail), "\n".join(tail)
    result = task_xcom(run, "pairs")
    assert "physical_plan" not in result and not re.search(r"#\d+", result["explain"])
    assert re.search(r"#\d+", task_xcom(run, "pairs", key="physical_plan"))
    extras = asset_event_extras("colocate://default/event_pairs", since=started)
    assert extras == [{"partition": "all", "version": 1, "rows": 2000}]


def asset_event_extras(uri: str, since) -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = (select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                 .where(AssetModel.uri == uri, AssetEvent.timestamp >= since).order_by(AssetEvent.timestamp))
        return list(session.scalars(query))


def task_xcom(run, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id,
                                                 key=key)).first()
        return XComModel.deserialize_value(row)
