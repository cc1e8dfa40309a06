"""Issue 17: local reads on a multi-host cluster. A Spark standalone cluster of two one-core workers
bound to 127.0.0.2 and 127.0.0.3 (two "machines"), three backends whose hosts are those addresses,
and a colocated join over 3 partitions x 8 buckets run by the join job under spark-submit, as the
operators run it. With the locality jar, every bucket task runs NODE_LOCAL on the host of the
replica it reads (Spark's event log says where each task ran); without it the same join runs with
no preferred host, and the rows are the same as plain Spark's. After a backend goes down and the
group is repaired, the new map's bucket tasks are local again. Spark's locality wait stays at its
default (3 s): the test observes the product's scheduling, it does not tune it."""

from __future__ import annotations

import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from balance_lake import Clock, Lake
from sparkcluster import SHORT_JVM, start_cluster

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import JoinPlan, JoinReport
from airflow_colocate.jobs.join import prepare_join
from airflow_colocate.operators.spark_env import job_path, submit_env
from airflow_colocate.spark import locality
from airflow_colocate.storage.plan_files import load_report, save_plan

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

HOSTS = ("127.0.0.2", "127.0.0.3")
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")
BUCKETS = 8
QUERY = ("SELECT o.dt, o.id, o.v AS ov, l.v AS lv FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.id = l.id")
SUBMIT_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("local-reads-cluster"), workers=2, worker_memory="1g", worker_hosts=HOSTS)
    yield c
    c.stop()
    assert c.leftover_pids() == [], "Spark cluster processes survived stop()"


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """be1 on 127.0.0.2, be2 and be3 on 127.0.0.3; two tables of one group, 8 buckets x 2 replicas
    (one on each host: two backends of one host never hold one bucket twice), 3 days."""
    root = tmp_path_factory.mktemp("local-reads-lake")
    clock = Clock()
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest", clock=clock)
    cat.init()
    lk = Lake(cat, clock, root)
    for name, host in (("be1", HOSTS[0]), ("be2", HOSTS[1]), ("be3", HOSTS[1])):
        lk.add_backend(name, host=host)
    for i, table in enumerate(("orders", "lineitem")):
        lk.create(table, buckets=BUCKETS, replicas=2)
        for d, day in enumerate(DAYS):
            lk.write(table, day, range(d * 10_000 + i, d * 10_000 + 600, 1 + i))
    yield lk
    cat.dispose()


def run_join(cluster, lake: Lake, tmp: Path, name: str, *, jar: bool) -> tuple[JoinPlan, JoinReport, list[dict]]:
    """The join job under spark-submit against the cluster, with or without the locality jar;
    returns the plan, the report and the event log's task-end events."""
    work, events = tmp / name, tmp / f"{name}-events"
    events.mkdir(parents=True)
    plan, _ = prepare_join(lake.catalog, QUERY, {"orders": None, "lineitem": None}, work_dir=work, job_name=name,
                           output_path=str(work / "out"), require_colocate=True)
    plan_file = work / "plan.json"
    save_plan(plan, plan_file)
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false", "spark.executor.memory": "512m", "spark.driver.memory": "512m",
            "spark.driver.host": "127.0.0.1", "spark.log.level": "WARN", "spark.executor.extraJavaOptions": SHORT_JVM}
    if jar:
        conf.update(locality.locality_conf())
    cmd = ["spark-submit", "--master", cluster.master_url, "--name", name]
    if "spark.jars" in conf:
        cmd += ["--jars", conf.pop("spark.jars")]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [job_path(), "--kind", "join", "--plan", str(plan_file)]
    env = {**os.environ, **submit_env(), "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    report = load_report(JoinReport, plan.report_uri)
    (log,) = list(events.iterdir())
    tasks = [e for e in map(json.loads, log.read_text().splitlines())
             if e.get("Event") in ("SparkListenerTaskEnd", "SparkListenerExecutorAdded")]
    print("\n".join(line for line in proc.stdout.splitlines() if line.startswith("colocate")))
    assert any(line.startswith(f"colocate-join: job {plan.job_id}: ") for line in proc.stdout.splitlines())  # the task log's lines
    return plan, report, tasks


def chosen_hosts(lake: Lake, plan: JoinPlan) -> list[str]:
    """The host of the backend each bucket seq reads (one per bucket: the join is colocated)."""
    roots = {b.root_uri: b.host for b in lake.catalog.backends.list()}
    out = []
    for b in range(BUCKETS):
        hosts = {locality.host_of(p.bucket_paths[b], roots) for t in plan.tables for p in t.partitions}
        assert len(hosts) == 1, f"bucket {b} reads from several hosts: {hosts}"
        out.append(hosts.pop())
    return out


def bucket_tasks(tasks: list[dict]) -> list[dict]:
    """The tasks of the stage that scans the buckets: 8 tasks that read input."""
    by_stage = defaultdict(list)
    for t in tasks:
        if t["Event"] == "SparkListenerTaskEnd" and t["Task End Reason"]["Reason"] == "Success":
            by_stage[t["Stage ID"]].append(t)
    scans = [ts for ts in by_stage.values()
             if len(ts) == BUCKETS and sum(t["Task Metrics"]["Input Metrics"]["Bytes Read"] for t in ts) > 0]
    assert len(scans) == 1, f"expected one bucket scan stage, got {[len(ts) for ts in by_stage.values()]}"
    return sorted(scans[0], key=lambda t: t["Task Info"]["Index"])


def result_rows(plan: JoinPlan, spark) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.parquet(plan.output_path).collect())


def plain_spark_rows(lake: Lake, spark) -> list[tuple]:
    """The same join by plain Spark over one replica of every bucket (no bucketing, a shuffle)."""
    from pyspark.sql import functions as F

    for table, view in (("orders", "plain_o"), ("lineitem", "plain_l")):
        _, parts = lake.catalog.reads.replicas(table)
        days = [spark.read.parquet(*[b[0].path for b in p.buckets if b[0].rows]).withColumn("dt", F.lit(p.value))
                for p in parts]
        df = days[0]
        for d in days[1:]:
            df = df.unionByName(d)
        df.createOrReplaceTempView(view)
    rows = spark.sql("SELECT o.dt, o.id, o.v, l.v FROM plain_o o JOIN plain_l l ON o.dt = l.dt AND o.id = l.id").collect()
    return sorted((r[0], r[1], r[2], r[3]) for r in rows)


def assert_local(lake, plan, report, tasks) -> float:
    hosts = chosen_hosts(lake, plan)
    scan = bucket_tasks(tasks)
    local = [t for t in scan if t["Task Info"]["Locality"] == "NODE_LOCAL" and t["Task Info"]["Host"] == hosts[t["Task Info"]["Index"]]]
    share = len(local) / len(scan)
    executors = [(e["Executor Info"]["Host"], e["Timestamp"]) for e in tasks if e["Event"] == "SparkListenerExecutorAdded"]
    assert share >= 0.95, (executors, [(t["Task Info"]["Index"], t["Task Info"]["Host"], t["Task Info"]["Locality"],
                                        hosts[t["Task Info"]["Index"]], t["Task Info"]["Launch Time"],
                                        t["Task Info"]["Finish Time"]) for t in scan])
    # the report says what the event log says
    assert report.locality.tasks == len(scan) and report.locality.node_local == len(local)
    assert report.locality.bytes_remote == 0 and report.locality.bytes_read > 0
    assert "locality: 8/8 input tasks node-local" in report.explain
    assert set(hosts) == set(HOSTS)  # the reads are spread over both machines
    return share


def test_bucket_tasks_run_on_the_replicas_host(cluster, lake, tmp_path, spark):
    expected = plain_spark_rows(lake, spark)
    assert len(expected) > 500

    plan, report, tasks = run_join(cluster, lake, tmp_path, "with-jar", jar=True)
    assert all(j.colocate for j in report.joins), report.explain
    share = assert_local(lake, plan, report, tasks)
    print(f"locality with the jar: {share:.0%} of bucket tasks NODE_LOCAL on their replica's host")
    got = [(str(r[0]), r[1], r[2], r[3]) for r in result_rows(plan, spark)]
    assert got == expected

    # without the jar: the same join, no preferred host (Spark reports such tasks PROCESS_LOCAL)
    plan2, report2, tasks2 = run_join(cluster, lake, tmp_path, "without-jar", jar=False)
    assert all(j.colocate for j in report2.joins), report2.explain
    assert chosen_hosts(lake, plan2) == chosen_hosts(lake, plan)
    scan = bucket_tasks(tasks2)
    assert not [t for t in scan if t["Task Info"]["Locality"] == "NODE_LOCAL"]
    assert report2.locality.node_local == 0 and report2.locality.note == "the locality jar is absent"
    assert [(str(r[0]), r[1], r[2], r[3]) for r in result_rows(plan2, spark)] == expected

    # be3 goes down; past the delay, the group is repaired onto be1 (the other host's buckets stay)
    cat = lake.catalog
    cat.backends.set_state("be3", "down", reason="disk died")
    lake.clock.advance(minutes=31)
    jobs = lake.run()["jobs"]
    assert [j.state for j in jobs if j.kind == "relocate"] == ["done"], jobs
    assert lake.names["be3"] not in {be for row in cat.groups.get("g").bucket_map for be in row}
    plan3, report3, tasks3 = run_join(cluster, lake, tmp_path, "after-repair", jar=True)
    assert lake.names["be3"] not in {r.backend_id for t in plan3.tables for p in t.partitions for c in p.candidates for r in c}
    assert_local(lake, plan3, report3, tasks3)
    assert [(str(r[0]), r[1], r[2], r[3]) for r in result_rows(plan3, spark)] == expected
