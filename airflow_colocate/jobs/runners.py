"""Runners execute a clone plan and return its report: the one seam between the balance loop and
Spark. The balance loop does not care which one it is given."""

from __future__ import annotations

from collections.abc import Callable

from airflow_colocate.planner.contract import ClonePlan, CloneReport

Runner = Callable[[ClonePlan], CloneReport]


def session_runner(spark) -> Runner:
    """Run clone plans in an existing Spark session (tests, notebooks, the CLI)."""
    from airflow_colocate.spark.clone_job import run_clone

    return lambda plan: run_clone(spark, plan)
