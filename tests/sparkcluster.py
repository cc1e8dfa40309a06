"""A throw-away Spark standalone cluster on loopback for the test suite (a helper, not a test file).

``start_cluster(base_dir, workers=2)`` starts a master and ``workers`` workers with ``spark-class``
from the installed PySpark — the same jars the driver uses, nothing downloaded — each worker with
one core, so a job with two tasks runs them in executors of two different workers. It returns a
:class:`SparkCluster` whose ``master_url`` is ``spark://127.0.0.1:<port>``. ``stop()`` kills every
process the cluster started (each daemon runs in its own session, and executors are children of
their worker, so one ``killpg`` per daemon reaches them) and is idempotent; it is registered with
:mod:`atexit` too. ``leftover_pids()`` names any process that survived, so a test can prove the
clean-up.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> Path:
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@dataclass
class SparkCluster:
    master_url: str
    web_url: str
    base_dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    worker_web_ports: list[int] = field(default_factory=list)

    def state(self) -> dict:
        """The master's JSON status page: workers, running and completed applications."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as r:
            return json.load(r)

    def logs(self) -> str:
        out = []
        for log in sorted(self.base_dir.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()
            out.append(f"--- {log.name} (last 30 lines)\n" + "\n".join(lines[-30:]))
        return "\n".join(out)

    def _group_alive(self, pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def leftover_pids(self) -> list[int]:
        """Processes of the cluster's sessions still running (including executors)."""
        pids = []
        sessions = {p.pid for p in self.procs}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # fields after the command: state ppid pgrp session ...
            if fields[0] != "Z" and int(fields[3]) in sessions:
                pids.append(int(proc.name))
        return pids

    def stop(self) -> None:
        for p in self.procs:
            if self._group_alive(p.pid):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and self.leftover_pids():
            time.sleep(0.2)
        for p in self.procs:
            if self._group_alive(p.pid):
                os.killpg(p.pid, signal.SIGKILL)
        for p in self.procs:
            try:
                p.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass


def _daemon_env(base_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="384m",
        SPARK_LOG_DIR=str(base_dir),
        SPARK_PID_DIR=str(base_dir),
        SPARK_NO_DAEMONIZE="1",
    )
    env.pop("SPARK_HOME", None)  # spark-class finds the PySpark installation itself
    return env


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def start_cluster(base_dir: Path, *, workers: int = 2, worker_memory: str = "1536m",
                  worker_hosts: Sequence[str] | None = None) -> SparkCluster:
    """A master and ``workers`` one-core workers on 127.0.0.1; waits until all are registered.

    ``worker_hosts`` binds worker *i* (and its executors) to its own loopback address instead
    (``--host`` and ``SPARK_LOCAL_IP``, e.g. 127.0.0.2 and 127.0.0.3): two "machines" whose
    executors Spark tells apart by host, as locality needs."""
    if worker_hosts is not None and len(worker_hosts) != workers:
        raise ValueError(f"worker_hosts names {len(worker_hosts)} hosts for {workers} workers: give one per worker")
    base_dir.mkdir(parents=True, exist_ok=True)
    env = _daemon_env(base_dir)
    port, web = _free_port(), _free_port()
    cluster = SparkCluster(master_url=f"spark://127.0.0.1:{port}", web_url=f"http://127.0.0.1:{web}", base_dir=base_dir)
    atexit.register(cluster.stop)
    try:
        cluster.procs.append(_start(
            [str(spark_class()), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web)],
            base_dir / "master.log", env))
        for i in range(1, workers + 1):
            wport = _free_port()
            cluster.worker_web_ports.append(wport)
            work = base_dir / f"worker{i}"
            work.mkdir(exist_ok=True)
            host = worker_hosts[i - 1] if worker_hosts else "127.0.0.1"
            cluster.procs.append(_start(
                [str(spark_class()), "org.apache.spark.deploy.worker.Worker",
                 "--host", host, "--cores", "1", "--memory", worker_memory,
                 "--webui-port", str(wport), "--work-dir", str(work), cluster.master_url],
                base_dir / f"worker{i}.log", {**env, "SPARK_LOCAL_IP": host}))
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for p in cluster.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {p.returncode} while starting\n{cluster.logs()}")
            try:
                alive = [w for w in cluster.state().get("workers", []) if w.get("state") == "ALIVE"]
            except (OSError, ValueError):  # not listening yet, or (while starting) an HTML page, not JSON
                alive = []
            if len(alive) == workers:
                return cluster
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark cluster did not come up in {START_TIMEOUT_S}s "
                                   f"({len(alive)} of {workers} workers alive)\n{cluster.logs()}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
