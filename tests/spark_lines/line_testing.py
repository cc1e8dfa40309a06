"""What the Spark-line tests share (a helper, not a test file): each line's cached virtualenv, a
driver environment that submits to that line, and plain Spark's answers computed on that line.

A line's virtualenv (``build_support/spark_lines_env.py``) holds that line's pyspark with the
workers' pyarrow and pandas (``requirements.lock``'s pins): the cluster's daemons, its workers'
Python and the jobs' driver all come from it; the Airflow side (this process) keeps its own
pyspark 4.2. Built once and cached.

Which lines get a cluster: ``$COLOCATE_TEST_SPARK_LINES`` (``3.5,4.3``, or ``all``, the default:
every line, as CI runs them). The entries are spread over several test files (``line_matrix.py:
MATRIX_FILES``) so that the two test workers share them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcluster import REPO, SHORT_JVM

sys.path.insert(0, str(REPO / "build_support"))
from spark_lines_env import line_venv, pyspark_home, worker_pins  # noqa: E402

from airflow_colocate.core.spark_lines import LINES  # noqa: E402

WORKER_EXTRAS = worker_pins()


DEFAULT_LINES = "all"


def lines_under_test() -> list[str]:
    given = os.environ.get("COLOCATE_TEST_SPARK_LINES", "") or DEFAULT_LINES
    if given.strip().lower() == "all":
        return list(LINES)
    return [line.strip() for line in given.split(",") if line.strip()]


def venv_of(line: str) -> Path:
    """The line's virtualenv; skipped (failed in CI) when it cannot be built."""
    try:
        return line_venv(line, WORKER_EXTRAS)
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def home_of(venv: Path) -> Path:
    return pyspark_home(venv)


def driver_env(venv: Path, home: Path) -> dict[str, str]:
    """What a job submitted to this line's cluster runs with: the line's ``spark-submit`` first on
    PATH, its Python for the driver and the executors, no PYTHONPATH of ours (the package arrives
    in the job's --py-files zip)."""
    conf_dir = home / "spark-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.executor.extraJavaOptions {SHORT_JVM}\nspark.executor.memory 1g\nspark.ui.showConsoleProgress false\n")
    python = str(venv / "bin" / "python")
    return {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1", "COLOCATE_HOME": str(home),
            "SPARK_CONF_DIR": str(conf_dir)}


PLAIN = r"""
import json, sys
from pyspark.sql import SparkSession
args = json.loads(sys.argv[1])
spark = (SparkSession.builder.master("local[1]").appName("plain").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
out = {"version": spark.version, "buckets": {}}
for name, (path, key) in args["tables"].items():
    df = spark.read.parquet(path)
    # Spark's own bucket id of a row: pmod(murmur3 hash of the bucket columns, bucket count)
    out["buckets"][name] = [[r[0], r[1]] for r in df.selectExpr(f"{key}", f"pmod(hash({key}), {args['buckets']})").collect()]
for name, path in args["tables_only"].items():
    spark.read.parquet(path).createOrReplaceTempView(name)
out["join"] = [list(r) for r in spark.sql(args["query"]).collect()]
print("PLAIN " + json.dumps(out, default=str))
spark.stop()
"""


def plain_spark_start(venv: Path, tables: dict[str, tuple[str, str]], buckets: int, query: str) -> subprocess.Popen:
    """Plain Spark of the line (a local session of its own pyspark), started in the background: each
    source row's bucket id and the query's rows over the sources (registered as views named like the
    tables). It needs only the sources, so it runs beside the entry's DAG (:func:`plain_spark_result`)."""
    args = {"tables": tables, "tables_only": {n: p for n, (p, _) in tables.items()}, "buckets": buckets, "query": query}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON",
                                                            "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR")}
    return subprocess.Popen([str(venv / "bin" / "python"), "-c", PLAIN, json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def plain_spark_result(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    line = next(x for x in out.splitlines() if x.startswith("PLAIN "))
    return json.loads(line[len("PLAIN "):])
