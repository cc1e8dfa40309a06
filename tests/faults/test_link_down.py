"""A worker cut off the network in the middle of a job: the two-host namespace cluster of
bench/netns_cluster.py (index 3: the bench uses 1, tests/spark/test_netns_cluster.py 2), a query
through ``jobs.read.query`` whose tasks take a few seconds each, and worker 1's link taken down
while they run, then brought back. Spark's own retries carry the job across (TCP resends what the
link dropped, a lost task runs again): the query returns exactly the written rows, once each, and
the catalog is unchanged. Needs root and iproute2; skips with one line otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench"))
from balance_lake import Clock, Lake  # noqa: E402
from netns_cluster import NetnsCluster, Network, unavailable  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

INDEX = 3
ROWS = 1200
# every row sleeps 2 ms in its task (a JVM call, no Python worker): 8 tasks of ~300 rows, ~0.6 s each on
# one core per worker, so the link goes down while tasks run and results are on their way
SQL = ("SELECT count(*), sum(id), count(DISTINCT id) FROM orders "
       "WHERE reflect('java.lang.Thread', 'sleep', CAST(2 AS BIGINT)) = 'null'")  # Thread.sleep is void
DOWN_S = 3.0


def lake_of(root: Path) -> str:
    url = f"sqlite:///{root / 'catalog.db'}"
    cat = Catalog(url, actor="pytest")
    cat.init()
    lake = Lake(cat, Clock(), root)
    for i, host in enumerate(Network(index=INDEX).worker_ips, 1):
        lake.add_backend(f"be{i}", host=host)
    lake.create("orders", buckets=8, replicas=1)
    for day in ("2026-11-01", "2026-11-02"):
        lake.write("orders", day, range(ROWS // 2))
    cat.dispose()
    return url


def driver(info_json: str, url: str) -> None:
    """The driver's side, in a process of its own: the query on the cluster, its rows or its error."""
    from airflow_colocate.jobs.read import query
    from airflow_colocate.spark.locality import wait_for_executors
    from airflow_colocate.spark.session import get_spark

    info = json.loads(info_json)
    os.environ["SPARK_LOCAL_IP"] = info["driver_host"]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_spark("link-down", info["master_url"], {
        "spark.driver.host": info["driver_host"], "spark.driver.bindAddress": info["driver_host"],
        "spark.executor.memory": "768m", "spark.driver.memory": "768m", "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2", "spark.task.maxFailures": "4"})
    spark.sparkContext.setLogLevel("OFF")
    wait_for_executors(spark, set(info["worker_hosts"]), 60)
    cat = Catalog(url, actor="driver")
    print("QUERY", flush=True)
    started = time.monotonic()
    try:
        out = {"rows": [list(r) for r in query(spark, SQL, {"orders": None}, catalog=cat, replace_views=True)]}
    except Exception as exc:  # noqa: BLE001 - the test reads the message
        out = {"error": str(exc)}
    out["seconds"] = time.monotonic() - started
    print("RESULT " + json.dumps(out), flush=True)
    spark.stop()


def test_worker_link_down_mid_query(tmp_path):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    url = lake_of(tmp_path / "lake")
    net = Network(index=INDEX)
    with NetnsCluster(tmp_path / "cluster", index=INDEX, link="1gbit") as cluster:
        env = {**os.environ, "SPARK_LOCAL_IP": cluster.driver_host,
               "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), str(HERE.parent / "balance"),
                                              os.environ.get("PYTHONPATH", "")])}
        script = f"import test_link_down as t; t.driver({json.dumps(cluster.info())!r}, {url!r})"
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=tmp_path)
        try:
            for line in proc.stdout:
                if line.startswith("QUERY"):
                    break
            time.sleep(1.5)  # registration done, the bucket tasks running
            subprocess.run(["ip", "-n", net.worker_ns(1), "link", "set", "eth0", "down"], check=True)
            time.sleep(DOWN_S)
            subprocess.run(["ip", "-n", net.worker_ns(1), "link", "set", "eth0", "up"], check=True)
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    results = [x for x in out.splitlines() if x.startswith("RESULT ")]
    assert results, err[-4000:]
    got = json.loads(results[0].removeprefix("RESULT "))
    assert "error" not in got, got["error"][:3000]
    half = ROWS // 2
    assert got["rows"] == [[ROWS, 2 * (half * (half - 1) // 2), half]]  # every row once, none twice
    assert got["seconds"] > DOWN_S / 2, got  # the query met the cut
    cat = Catalog(url, actor="pytest")
    assert all(r.state == "verified" for p in cat.reads.replicas("orders")[1] for b in p.buckets for r in b)
    cat.dispose()
