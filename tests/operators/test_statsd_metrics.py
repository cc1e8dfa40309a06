"""The operators' metrics reach a StatsD server: a UDP listener on loopback, Airflow's ``[metrics]``
pointed at it as a deployment would (``AIRFLOW__METRICS__STATSD_ON``), ``Stats`` set up as the task
runner does in a task process; then a real write, a colocated join, a join that falls back and a
sensor poke. spark-submit is the one seam replaced: each plan runs in the shared session through
the job entry's own ``run_plan`` (as spark-submit would run it). And a broken metrics backend
never fails a task."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.jobs import metrics
from airflow_colocate.operators.base import ColocateSparkOperator
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.write import ColocateWriteOperator
from airflow_colocate.sensors.stable import GroupStableSensor

CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}


def init_stats():
    """What Airflow's task runner does at the start of a task process."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)


@pytest.fixture
def statsd(monkeypatch):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.3)
    for key, value in {"STATSD_ON": "True", "STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(sock.getsockname()[1]),
                       "STATSD_PREFIX": "airflow"}.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    init_stats()

    def received() -> list[str]:
        """Every metric line that arrived so far (StatsD may pack several in one datagram)."""
        lines = []
        deadline = time.time() + 2
        while time.time() < deadline:
            try:
                data = sock.recv(65535)
            except TimeoutError:
                break
            lines += data.decode().splitlines()
        return lines

    yield received
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
    init_stats()  # back to no metrics for the rest of the session
    sock.close()


@pytest.fixture
def in_session(spark, monkeypatch):
    from airflow_colocate.spark import entry

    def submit(self, context, plan_uri, report_uri):
        entry.run_plan(spark, entry.read_plan(plan_uri, expect=self.job_kind))

    monkeypatch.setattr(ColocateSparkOperator, "submit", submit)


def write_op(table: str, source, cols: str, key: str) -> ColocateWriteOperator:
    return ColocateWriteOperator(task_id=f"load_{table}", table=table, source=str(source), partition="2026-11-01",
                                 columns=cols, dist_cols=[key], bucket_num=4, replication_num=2, partition_col="dt",
                                 colocate_with="g", conf=CONF)


@pytest.mark.spark
def test_a_write_a_join_and_a_sensor_send_their_metrics(colocate_env, in_session, spark, statsd, tmp_path):
    o, li = tmp_path / "o", tmp_path / "l"
    o.mkdir(), li.mkdir()
    pq.write_table(pa.table({"o_orderkey": pa.array(range(100), pa.int64())}), o / "p.parquet")
    pq.write_table(pa.table({"l_orderkey": pa.array([k // 3 for k in range(300)], pa.int64()),
                             "l_price": pa.array(range(300), pa.int64())}), li / "p.parquet")
    orders = write_op("orders", o, "o_orderkey bigint, dt date", "o_orderkey").execute(context={})
    write_op("lineitem", li, "l_orderkey bigint, l_price bigint, dt date", "l_orderkey").execute(context={})
    lines = statsd()
    assert "airflow.colocate.write.committed:2|c" not in lines  # one count per write, not a running total
    assert lines.count("airflow.colocate.write.committed:1|c") == 2
    assert "airflow.colocate.write.rows:100|c" in lines and "airflow.colocate.write.rows:300|c" in lines
    assert f"airflow.colocate.write.bytes:{orders['bytes']}|c" in lines and orders["bytes"] > 0
    assert "airflow.colocate.write.replicas:8|c" in lines  # 4 buckets x 2 replicas
    assert any(x.startswith("airflow.colocate.write.seconds:") and x.endswith("|ms") for x in lines)

    query = ("SELECT o.o_orderkey, sum(l.l_price) AS p FROM orders o JOIN lineitem l "
             "ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.o_orderkey")
    tables = {"orders": ["2026-11-01"], "lineitem": ["2026-11-01"]}
    out = tmp_path / "out"
    joined = ColocateJoinOperator(task_id="j", conf=CONF, query=query, tables=tables,
                                  output_path=(out / "a").as_uri()).execute(context={})
    assert joined["colocate"] is True
    ColocateJoinOperator(task_id="j2", conf=CONF, query=query, tables=tables, output_path=(out / "b").as_uri(),
                         disable_colocate_join=True).execute(context={})
    lines = statsd()
    assert lines.count("airflow.colocate.join.colocated:1|c") == 1
    assert lines.count("airflow.colocate.join.fallback:1|c") == 1  # plain StatsD has no tags: the reason is
    assert sum(x.startswith("airflow.colocate.join.seconds:") for x in lines) == 2  # in tagged backends only

    assert GroupStableSensor(task_id="s", group="g").poke(context={}).is_done
    assert "airflow.colocate.sensor.stable:1|c" in statsd()

    # verify re-hashes every replica; a repair after be1 goes down clones its replicas
    from airflow_colocate.jobs.balance import Balancer, BalanceOptions
    from airflow_colocate.jobs.runners import local_runner
    from airflow_colocate.jobs.verify import session_runner, verify

    checked = verify(colocate_env, session_runner(spark), work_dir=tmp_path / "runs")
    colocate_env.backends.set_state("be1", "down", reason="test")
    Balancer(colocate_env, local_runner(), BalanceOptions(relocate_delay=timedelta(0)), work_dir=tmp_path / "runs").run()
    lines = statsd()
    assert f"airflow.colocate.verify.checked:{checked['replicas']}|c" in lines and checked["replicas"] == 16
    assert "airflow.colocate.verify.bad:0|c" in lines
    cloned = [int(x.split(":")[1].split("|")[0]) for x in lines if x.startswith("airflow.colocate.clone.replicas:")]
    assert sum(cloned) > 0 and any(x.startswith("airflow.colocate.clone.bytes:") for x in lines)
    assert any(x.startswith("airflow.colocate.clone.seconds:") for x in lines)


def test_a_broken_metrics_backend_never_fails_the_task(monkeypatch, caplog):
    from airflow.sdk.observability import stats

    def broken():
        raise RuntimeError("statsd exploded")

    stats.initialize(factory=broken, export_legacy_names=False)
    monkeypatch.setattr(metrics, "_warned", False)
    try:
        metrics.write_committed({"table": "default.orders", "rows": 5, "bytes": 10, "replicas": 2, "seconds": 0.1})
        metrics.join_finished({"joins": [{"colocate": False, "reason": "group is not stable: be1 down"}]})
        metrics.read_failover("default.orders", reason="crc")
        init_stats()
        metrics.clone_done(object(), kind="balance")  # not a report: still no exception
        metrics.write_committed({"table": "t", "rows": "many"})
    finally:
        init_stats()
    assert [r.getMessage() for r in caplog.records if "metrics not sent" in r.getMessage()] == [
        "colocate: metrics not sent (RuntimeError: statsd exploded); the task goes on"]  # once per process


def test_fallback_reasons_are_a_few_tag_values():
    assert metrics.reason_tag("group is not stable: backend be2 is down") == "group_not_stable"
    assert metrics.reason_tag("tables are not in the same group: x is in group y") == "not_same_group"
    assert metrics.reason_tag("colocate join is disabled") == "disabled"
    assert metrics.reason_tag(None) == "other"
