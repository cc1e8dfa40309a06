"""What every colocate Spark job needs from ``spark-submit``, shared by the operators."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pyspark

from airflow_colocate.core.spark_lines import SparkLine
from airflow_colocate.spark.lines import VERSION_EXTRA, submit_line

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


def _extra(conn_id: str | None, key: str) -> str | None:
    if not conn_id:
        return None
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    try:
        conn = SparkSubmitHook.get_connection(conn_id)
    except Exception:  # no such connection: the provider falls back to yarn; so do we, to the binary
        return None
    given = (conn.extra_dejson or {}).get(key)
    return str(given).strip() if given not in (None, "") else None


def cluster_line(conn_id: str | None, spark_binary: str | None, env: dict[str, str]) -> SparkLine:
    """The Spark line of the cluster a job is submitted to, known, never guessed: the Spark
    connection's ``spark_version`` extra, else ``spark-submit --version`` of the binary that
    connection names (the operator's ``spark_binary``, else the connection's ``spark-binary``, on
    the job's PATH; cached per binary); refused in one line otherwise, and for a line this package
    has no jar for (:func:`airflow_colocate.spark.lines.submit_line`)."""
    return submit_line(_extra(conn_id, VERSION_EXTRA), spark_binary or _extra(conn_id, "spark-binary"),
                       env.get("PATH", os.environ.get("PATH", "")), f"connection {conn_id!r}")
