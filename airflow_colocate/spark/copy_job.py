"""The clone job: copy whole replica directories between backends, verified by checksum.

Used by repair and balance (clone-and-drop): the copies run as one Spark job whose tasks do the
work in Python on the executors with :func:`airflow_colocate.storage.copy.copy_replica`, the same
primitive the write job uses, so every copy goes through ``tmp + fsync + rename`` and a sha256.

The plan is provisional (``plans.py`` has no clone contract yet)::

    {"kind": "clone", "job_id": "...", "report_uri": "file:///…/report.json",
     "copies": [{"bucket_seq": 3, "backend_id": 4, "src": "<replica dir>", "dst": "<replica dir>",
                 "files": {"<name>": "<sha256>", …} | null, "checksum": "<replica checksum>" | null}]}

and the report is ``{"kind": "clone", "job_id", "seconds", "replicas": [ReplicaReport as dict]}``.

    python -m airflow_colocate.spark.copy_job --plan /path/clone.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from airflow_colocate.errors import ColocateError
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import fs


def log(message: str) -> None:
    print(f"colocate-clone: {message}", flush=True)


def clone_one(task: dict) -> dict:
    """Executor side: copy one replica directory; returns a ReplicaReport-shaped dict."""
    import pyarrow.parquet as pq

    files, total = copy_mod.copy_replica(task["src"], task["dst"], expect=task.get("files"))
    checksum = copy_mod.replica_checksum(files)
    if task.get("checksum") and checksum != task["checksum"]:
        raise ColocateError(
            f"clone of {task['src']} to {task['dst']}: replica checksum {checksum} differs from the expected "
            f"{task['checksum']}"
        )
    rows = 0
    for name, _ in files:
        with fs.open_read(fs.join(task["dst"], name)) as f:
            rows += pq.read_metadata(f).num_rows
    return {
        "bucket_seq": task.get("bucket_seq", -1),
        "backend_id": task.get("backend_id", -1),
        "path": task["dst"],
        "files": [n for n, _ in files],
        "rows": rows,
        "bytes": total,
        "checksum": checksum,
    }


def run_copies(spark, copies: list[dict]) -> list[dict]:
    """Run every copy as one Spark job (one task per replica, up to the default parallelism)."""
    if not copies:
        return []
    sc = spark.sparkContext
    sc.setJobDescription(f"colocate-clone {len(copies)} replicas")
    slices = max(1, min(len(copies), sc.defaultParallelism))
    return sc.parallelize(copies, slices).map(clone_one).collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow_colocate.spark.copy_job", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="path or URI of the clone plan JSON")
    parser.add_argument("--master", default=None)
    args = parser.parse_args(argv)
    plan = json.loads(fs.read_text(args.plan))
    from pyspark.sql import SparkSession

    from airflow_colocate.spark.session import get_spark

    owned = SparkSession.getActiveSession() is None
    spark = get_spark(f"colocate-clone {plan.get('job_id', '')}", master=args.master)
    started = time.time()
    try:
        replicas = run_copies(spark, plan["copies"])
        report = {"kind": "clone", "job_id": plan.get("job_id"), "seconds": round(time.time() - started, 3),
                  "replicas": replicas}
        fs.write_text_atomic(plan["report_uri"], json.dumps(report, indent=2, sort_keys=True))
        log(f"cloned {len(replicas)} replicas; report written to {plan['report_uri']}")
    except ColocateError as exc:
        log(f"FAILED: {exc}")
        return 1
    except Exception as exc:  # an executor's ColocateError arrives wrapped
        from airflow_colocate.spark.write_job import _executor_error, _spark_error

        if not _spark_error(exc):
            raise
        log(f"FAILED: {_executor_error(exc)}")
        return 1
    finally:
        if owned:
            spark.stop()
    return 0


if __name__ == "__main__":
    from airflow_colocate.spark import copy_job as _job

    sys.exit(_job.main())
