"""What every colocate Spark job needs from ``spark-submit``, shared by the operators."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pyspark

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
