"""What every colocate Spark job needs from ``spark-submit``, shared by the operators."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.spark_lines import SparkLine, UnsupportedLine, spark_line

ENTRY = Path(__file__).resolve().parent.parent / "spark" / "entry.py"


def job_path() -> str:
    """The file ``spark-submit`` runs for every job: :mod:`airflow_colocate.spark.entry`, told the
    plan and its kind (``--plan <uri> --kind write``)."""
    return str(ENTRY)


def submit_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``spark-submit`` from the installed PySpark when none is on PATH (one version for the Python
    side and the jars), and this interpreter for the driver and local executors so that
    ``airflow_colocate`` imports there."""
    env = dict(extra or {})
    path = env.get("PATH", os.environ.get("PATH", ""))
    if not shutil.which("spark-submit", path=path) and not os.environ.get("SPARK_HOME"):
        env["PATH"] = f"{Path(pyspark.__file__).parent / 'bin'}{os.pathsep}{path}"
    env.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", sys.executable))
    env.setdefault("PYSPARK_DRIVER_PYTHON", os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable))
    return env


# -- the cluster's Spark line ------------------------------------------------------------------

VERSION_EXTRA = "spark_version"  # the Spark connection's extra that names the cluster's Spark
_VERSION_RE = re.compile(r"version\s+(\d+\.\d+\.\d+\S*)")


def _extra_version(conn_id: str | None) -> str | None:
    if not conn_id:
        return None
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    try:
        conn = SparkSubmitHook.get_connection(conn_id)
    except Exception:  # no such connection: the provider falls back to yarn; so do we, to the binary
        return None
    given = (conn.extra_dejson or {}).get(VERSION_EXTRA)
    return str(given).strip() if given not in (None, "") else None


def _binary(conn_id: str | None, spark_binary: str | None, env: dict[str, str]) -> str | None:
    """The spark-submit the provider will run: the operator's ``spark_binary``, else the
    connection's ``spark-binary`` extra, else ``spark-submit``, looked up on the job's PATH."""
    name = spark_binary
    if not name and conn_id:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        try:
            name = (SparkSubmitHook.get_connection(conn_id).extra_dejson or {}).get("spark-binary")
        except Exception:
            name = None
    found = shutil.which(name or "spark-submit", path=env.get("PATH", os.environ.get("PATH", "")))
    return os.path.realpath(found) if found else None


def binary_version(binary: str) -> str | None:
    """``binary --version``'s Spark version, cached per binary (path, size and time) in
    ``$COLOCATE_HOME/cache/spark-versions.json``: one JVM start per spark-submit, not per task."""
    from airflow_colocate.core.paths import colocate_home

    st = os.stat(binary)
    key = f"{binary}|{st.st_size}|{int(st.st_mtime)}"
    cache = colocate_home() / "cache" / "spark-versions.json"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SPARK_PRINT_LAUNCH_COMMAND": ""})
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION_RE.search(done.stderr + done.stdout)
    if not found:
        return None
    known[key] = found.group(1)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
    tmp.write_text(json.dumps(known, indent=1))
    os.replace(tmp, cache)
    return known[key]


def cluster_line(conn_id: str | None, spark_binary: str | None, env: dict[str, str]) -> SparkLine:
    """The Spark line of the cluster a job is submitted to, known, never guessed: the Spark
    connection's ``spark_version`` extra, else ``spark-submit --version`` of the binary that
    connection names (cached per binary); refused in one line otherwise, and for a line this
    package has no jar for."""
    given = _extra_version(conn_id)
    if given is not None:
        where = f"connection {conn_id!r} extra {VERSION_EXTRA}={given!r}"
    else:
        binary = _binary(conn_id, spark_binary, env)
        given = binary_version(binary) if binary else None
        where = f"{binary} --version"
        if given is None:
            raise ColocateError(f"the Spark version of the cluster behind connection {conn_id!r} is unknown "
                                f"({'no spark-submit on PATH' if binary is None else where + ' printed none'}): "
                                f'set the connection\'s extra {{"{VERSION_EXTRA}": "3.5.6"}} (its Spark version)')
    try:
        return spark_line(given)
    except UnsupportedLine as exc:
        raise ColocateError(f"{exc} (from {where})") from None
