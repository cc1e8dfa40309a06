"""A throw-away HDFS for the test suite (a helper module, not a test file): Hadoop's own
``MiniDFSCluster`` with three DataNodes, from Maven Central's ``hadoop-client-minicluster`` of the
Hadoop the pinned pyspark bundles (fetched by ``scripts/setup.sh --with-s3``), in a JVM of its own.

``start_hdfs(base_dir)`` compiles ``tests/hdfs/MiniHdfs.java`` once, starts it on a free port and
returns an :class:`HdfsServer` whose ``uri`` is ``hdfs://localhost:<port>``; ``stop()`` kills it
and is registered with :mod:`atexit`.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
from s3server import stop_process

from airflow_colocate.spark import object_stores
from airflow_colocate.spark.locality import local_line

HERE = Path(__file__).resolve().parent / "hdfs"
START_TIMEOUT_S = 240


def minicluster_jar() -> Path:
    return object_stores.maven_path("org.apache.hadoop", "hadoop-client-minicluster",
                                    object_stores.HADOOP_OF_LINE[local_line()])


def classpath() -> str:
    jars = Path(pyspark.__file__).parent / "jars"
    return os.pathsep.join([str(minicluster_jar()), str(jars / "*")])


@dataclass
class HdfsServer:
    uri: str
    log_path: Path
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, self.stop)


def start_hdfs(base_dir: Path) -> HdfsServer:
    if not minicluster_jar().exists():
        raise RuntimeError(f"{minicluster_jar()} is missing: run scripts/setup.sh --with-s3")
    base = Path(base_dir) / "hdfs"
    classes = base / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-d", str(classes), "-cp", classpath(), str(HERE / "MiniHdfs.java")], check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = base / "minidfs.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(["java", "-Xmx768m", "-cp", os.pathsep.join([str(classes), classpath()]), "MiniHdfs",
                             str(base / "data"), str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = HdfsServer(uri=f"hdfs://localhost:{port}", log_path=log_path, _proc=proc)
    atexit.register(server.stop)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the MiniDFSCluster exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        if "READY " in log_path.read_text(errors="replace"):
            return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"the MiniDFSCluster was not up within {START_TIMEOUT_S}s:\n{log_path.read_text()[-3000:]}")
