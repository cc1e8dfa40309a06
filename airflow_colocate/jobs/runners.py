"""Runners execute a clone plan and return its report: the one seam between the balance loop and
Spark. The balance loop does not care which one it is given."""

from __future__ import annotations

import time
from collections.abc import Callable

from airflow_colocate.core.contract import (
    ClonePlan,
    CloneReport,
    CloneResult,
    VerifyResult,
)

Runner = Callable[[ClonePlan], CloneReport]


def session_runner(spark) -> Runner:
    """Run clone plans in an existing Spark session (tests, notebooks, the CLI). The session may be
    one a user started on a cluster that never installed this package, while the clone runs this
    package's copy function on its executors: the package is shipped to it first (once per
    application; :func:`airflow_colocate.spark.shipping.ship`)."""
    from airflow_colocate.spark.clone_job import run_clone
    from airflow_colocate.spark.shipping import ship

    ship(spark)
    return lambda plan: run_clone(spark, plan)


def local_runner(threads: int | None = None) -> Runner:
    """Run clone plans in this process, ``threads`` replicas at a time (default: the clone job's 4).

    For a small cluster whose backends this machine can reach, and for a control plane without
    Spark. Every task goes through the function the Spark clone job runs on its executors
    (:func:`airflow_colocate.spark.clone_job.run_partition`, i.e. ``clone_task``/``verify_task``),
    so a copy is hashed, verified and cleaned up exactly as on a cluster; only the spreading over
    executors is missing. Importing the clone job does not import pyspark."""
    from airflow_colocate.spark import clone_job

    n = max(1, clone_job.DEFAULT_THREADS if threads is None else threads)

    def run(plan: ClonePlan) -> CloneReport:
        started = time.time()
        items = clone_job.task_items(plan)  # biggest first, as the Spark job deals them
        results = clone_job.run_partition(items, n) if items else []
        copies = [CloneResult(**r) for kind, r in results if kind == "copy"]
        verifies = [VerifyResult(**r) for kind, r in results if kind == "verify"]
        return CloneReport(job_id=plan.job_id, copies=copies, verifies=verifies, seconds=round(time.time() - started, 3),
                           bytes=sum(c.bytes for c in copies if c.ok), spark_version="local")

    return run
