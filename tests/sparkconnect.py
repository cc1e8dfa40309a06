"""A real Spark Connect server for tests: ``spark-submit --class …SparkConnectServer`` from the
pyspark package's own jars (``spark-connect_2.13`` ships in them), with this project's locality jar,
on a free loopback port. Tests talk to it through ``sc://127.0.0.1:<port>``, as a notebook would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
PORT_CONF = "spark.connect.grpc.binding.port"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


@dataclass
class ConnectServer:
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_connect_server(workdir: Path, conf: dict[str, str], *, timeout_s: float = 120.0,
                         master: str = "local[2]") -> ConnectServer:
    """Start the server and wait until its port answers; its output goes to ``workdir/server.log``
    (the first lines of which are in the error when it does not come up)."""
    port = free_port()
    log = workdir / "server.log"
    args = [spark_submit(), "--class", SERVER_CLASS, "--master", master, "--conf", f"{PORT_CONF}={port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1"]
    jars = conf.get("spark.jars")
    if jars:
        args += ["--jars", jars]
    for key, value in conf.items():
        if key != "spark.jars":
            args += ["--conf", f"{key}={value}"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                   start_new_session=True)
    server = ConnectServer(process, port, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"the Spark Connect server did not answer on port {port} within {timeout_s:.0f}s: {tail}")
