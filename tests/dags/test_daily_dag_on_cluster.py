"""The deployment topology without Docker: the daily DAG against a real Spark standalone cluster
(a master and two one-core workers on loopback, started from the installed PySpark) with the
colocation catalog in PostgreSQL, configured only through Airflow connections — as the docker/
stack does. The join must be colocated and run across executors of both workers, and every
process the cluster started must be gone afterwards."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlparse

import pendulum
import pytest

from colocate_testing import add_local_backends
from pgserver import fresh_pg_database
from daily_pipeline import check_day, load_dag
from sparkcluster import SHORT_JVM, start_cluster
from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import JoinReport
from airflow_colocate.storage.plan_files import load_report

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.cluster]

DATE = pendulum.datetime(2026, 11, 3, tz="UTC")
# The run's share of CI's time budget (the whole suite must stay well under 20 minutes on 2 cores);
# it takes 1.5-2.5 minutes here, so passing this means a cluster problem, not a slow machine.
RUN_BUDGET_SECONDS = 420


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    yield cluster
    cluster.stop()
    assert cluster.leftover_pids() == [], "Spark cluster processes survived stop()"


@pytest.fixture
def cluster_env(airflow_db, spark_cluster, pg_server_url, tmp_path, monkeypatch):
    url = fresh_pg_database(pg_server_url)
    master = urlparse(spark_cluster.master_url)
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_COLOCATE_DEFAULT", json.dumps(
        {"conn_type": "colocate", "extra": {"catalog_url": url, "work_dir": str(tmp_path / "runs")}}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": f"spark://{master.hostname}", "port": master.port}))
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLOCATE_LANDING", str(tmp_path / "landing"))
    # Event logs tell which executor (on which worker) ran which task.
    conf_dir, events = tmp_path / "spark-conf", tmp_path / "events"
    conf_dir.mkdir()
    events.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.rolling.enabled false\nspark.eventLog.compress false\nspark.eventLog.dir {events.as_uri()}\nspark.executor.memory 1g\n"
        f"spark.executor.extraJavaOptions {SHORT_JVM}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    yield cat, tmp_path
    cat.dispose()


def executors_per_app(events: Path) -> dict[str, dict]:
    """App name -> {"workers": {executor id: worker web port}, "tasks": {executor id: task count}}."""
    apps = {}
    for log in events.iterdir():
        name, workers, tasks = None, {}, defaultdict(int)
        for line in log.read_text().splitlines():
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerApplicationStart":
                name = e["App Name"]
            elif kind == "SparkListenerExecutorAdded":
                urls = e["Executor Info"].get("Log Urls", {})
                workers[e["Executor ID"]] = urlparse(urls.get("stdout", "")).port
            elif kind == "SparkListenerTaskEnd":
                tasks[e["Task Info"]["Executor ID"]] += 1
        apps[name] = {"workers": workers, "tasks": dict(tasks)}
    return apps


def test_daily_dag_on_a_standalone_cluster_with_the_catalog_in_postgres(cluster_env, spark_cluster, spark):
    catalog, tmp = cluster_env
    assert catalog.engine.dialect.name == "postgresql"
    started = time.monotonic()
    run = load_dag("colocate_tpch_daily").test(logical_date=DATE)
    took = time.monotonic() - started
    assert run.state == "success", spark_cluster.logs()
    assert took < RUN_BUDGET_SECONDS, f"the daily DAG took {took:.0f}s on the cluster"

    ds = DATE.to_date_string()
    check_day(catalog, spark, tmp / "landing" / ds, ds)
    assert all(g.stable for g in catalog.groups.list())

    reports = [p for p in (tmp / "runs").glob("*/report.json") if json.loads(p.read_text()).get("kind") == "join"]
    joins = [load_report(JoinReport, str(p)) for p in reports]
    assert len(joins) == 1
    assert "colocate: true" in joins[0].explain and "colocate: false" not in joins[0].explain
    assert all(j.colocate and j.exchanges_left == j.exchanges_right == 0 for j in joins[0].joins), joins[0].physical_plan

    # every job ran on the cluster, and the join's tasks on executors of both workers
    completed = {a["name"] for a in spark_cluster.state()["completedapps"]}
    assert {n for n in completed if n.startswith("colocate-join")}, completed
    assert len([n for n in completed if n.startswith("colocate-write")]) == 2, completed
    apps = executors_per_app(tmp / "events")
    join_app = next(v for k, v in apps.items() if k.startswith("colocate-join"))
    busy_workers = {join_app["workers"][ex] for ex, n in join_app["tasks"].items() if n and ex != "driver"}
    assert busy_workers == set(spark_cluster.worker_web_ports), join_app
