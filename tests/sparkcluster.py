"""A throw-away Spark standalone cluster on loopback for the test suite (a helper, not a test file).

``start_cluster(base_dir, workers=2)`` starts a master and ``workers`` workers with ``spark-class``
from the installed PySpark — the same jars the driver uses, nothing downloaded — each worker with
one core, so a job with two tasks runs them in executors of two different workers. It returns a
:class:`SparkCluster` whose ``master_url`` is ``spark://127.0.0.1:<port>``. ``stop()`` kills every
process the cluster started (each daemon runs in its own session, and executors are children of
their worker, so one ``killpg`` per daemon reaches them) and is idempotent; it is registered with
:mod:`atexit` too. ``leftover_pids()`` names any process that survived, so a test can prove the
clean-up.

``python=`` gives the workers a Python of their own (a virtualenv's ``bin/python``, e.g. one from
:func:`worker_venv` holding only PySpark and pyarrow): a cluster that has never seen this package.
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

REPO = Path(__file__).resolve().parent.parent
# What a worker needs at run time to run our jobs, besides what the job ships (the package, the jar)
WORKER_PACKAGES = ("pyspark", "py4j", "pyarrow")

START_TIMEOUT_S = 90
# JVM flags for the suite's short-lived JVMs (drivers through tests/conftest.py's SPARK_SUBMIT_OPTS,
# these clusters' daemons here, their executors by each app's conf): their work is seconds of class
# loading and small tasks, where C1 alone and the serial collector save about a fifth of the CPU.
SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
STOP_TIMEOUT_S = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class(spark_home: Path | None = None) -> Path:
    """``spark-class`` of ``spark_home`` (a pyspark folder: another line's, tests/spark_lines), else
    of the installed PySpark."""
    return Path(spark_home or Path(pyspark.__file__).parent) / "bin" / "spark-class"


@dataclass
class SparkCluster:
    master_url: str
    web_url: str
    base_dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    worker_web_ports: list[int] = field(default_factory=list)
    python: str | None = None  # the workers' own Python, when start_cluster was given one

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


def _daemon_env(base_dir: Path, python: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="384m",
        SPARK_LOG_DIR=str(base_dir),
        SPARK_PID_DIR=str(base_dir),
        SPARK_NO_DAEMONIZE="1",
    )
    env.setdefault("SPARK_DAEMON_JAVA_OPTS", SHORT_JVM)
    env.pop("SPARK_HOME", None)  # spark-class finds the PySpark installation itself
    if python is not None:
        # a machine whose only Python is that environment: first on PATH, nothing of ours on PYTHONPATH
        for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYSPARK_DRIVER_PYTHON"):
            env.pop(name, None)
        bin_dir = str(Path(python).parent)
        env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=str(python),
                   VIRTUAL_ENV=str(Path(bin_dir).parent))
    return env


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def start_cluster(base_dir: Path, *, workers: int = 2, worker_memory: str = "1536m",
                  worker_hosts: Sequence[str] | None = None, python: str | Path | None = None,
                  master_host: str = "127.0.0.1", worker_prefix: Sequence[Sequence[str]] | None = None,
                  spark_home: Path | None = None) -> SparkCluster:
    """A master and ``workers`` one-core workers on 127.0.0.1; waits until all are registered.

    ``python``: the workers' Python (their PATH and ``PYSPARK_PYTHON``; no PYTHONPATH of the test
    process). Executors run the interpreter the driver names (its ``PYSPARK_PYTHON``), so a driver
    of this cluster sets ``PYSPARK_PYTHON=cluster.python``, as one of a real cluster names the
    workers' interpreter.

    ``worker_hosts`` binds worker *i* (and its executors) to its own loopback address instead
    (``--host`` and ``SPARK_LOCAL_IP``, e.g. 127.0.0.2 and 127.0.0.3): two "machines" whose
    executors Spark tells apart by host, as locality needs.

    ``master_host`` binds the master elsewhere than 127.0.0.1, and ``worker_prefix`` starts worker
    *i* under a command prefix (``ip netns exec NS``): bench/netns_cluster.py puts each worker in a
    network namespace of its own, reaching the master over a shaped link.

    ``spark_home``: the pyspark folder whose daemons run (another Spark line's, from its own
    virtualenv); default the installed PySpark."""
    if worker_hosts is not None and len(worker_hosts) != workers:
        raise ValueError(f"worker_hosts names {len(worker_hosts)} hosts for {workers} workers: give one per worker")
    if worker_prefix is not None and len(worker_prefix) != workers:
        raise ValueError(f"worker_prefix names {len(worker_prefix)} prefixes for {workers} workers: give one per worker")
    base_dir.mkdir(parents=True, exist_ok=True)
    env = _daemon_env(base_dir, None if python is None else str(python))
    port, web = _free_port(), _free_port()
    cluster = SparkCluster(master_url=f"spark://{master_host}:{port}", web_url=f"http://{master_host}:{web}", base_dir=base_dir,
                           python=None if python is None else str(python))
    atexit.register(cluster.stop)
    try:
        cluster.procs.append(_start(
            [str(spark_class(spark_home)), "org.apache.spark.deploy.master.Master",
             "--host", master_host, "--port", str(port), "--webui-port", str(web)],
            base_dir / "master.log", {**env, "SPARK_LOCAL_IP": master_host}))
        for i in range(1, workers + 1):
            wport = _free_port()
            cluster.worker_web_ports.append(wport)
            work = base_dir / f"worker{i}"
            work.mkdir(exist_ok=True)
            host = worker_hosts[i - 1] if worker_hosts else "127.0.0.1"
            cluster.procs.append(_start(
                [*(worker_prefix[i - 1] if worker_prefix else ()), str(spark_class(spark_home)),
                 "org.apache.spark.deploy.worker.Worker",
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


def locked_pins(names: Sequence[str], lock: Path = REPO / "requirements.lock") -> list[str]:
    """``name==version`` of each of ``names`` as ``requirements.lock`` pins it."""
    pins = {}
    for line in lock.read_text().splitlines():
        name, sep, version = line.split(";")[0].split("#")[0].strip().partition("==")
        if sep:
            pins[name.strip().lower()] = f"{name.strip()}=={version.strip()}"
    missing = [n for n in names if n.lower() not in pins]
    if missing:
        raise RuntimeError(f"{lock} pins no {', '.join(missing)}: add them, or name packages it pins")
    return [pins[n.lower()] for n in names]


def worker_venv(dest: Path, packages: Sequence[str] = WORKER_PACKAGES, python: str | None = None) -> Path:
    """A fresh virtualenv at ``dest`` holding only ``packages`` at ``requirements.lock``'s versions,
    installed from uv's cache (``--offline``: no network); returns its ``bin/python``. Same Python
    version as ``python`` (default: this one), as PySpark needs on driver and executors.
    Raises RuntimeError naming what failed (uv missing, a package not in the cache)."""
    import shutil
    import sys

    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv not found on PATH: install uv (https://docs.astral.sh/uv/) to build the workers' virtualenv")
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    steps = [[uv, "venv", "-q", "--python", base, str(dest)],
             [uv, "pip", "install", "-q", "--offline", "--python", str(dest / "bin" / "python"), *locked_pins(packages)]]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return dest / "bin" / "python"
