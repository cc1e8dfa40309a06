"""The one entry of every Spark job: a plan file in, a report (or one error line) out.

Launch::

    spark-submit [--master …] …/airflow_colocate/spark/entry.py --plan file:///…/plan.json
    python -m airflow_colocate.spark.entry --plan /…/plan.json [--master local[2]]

The plan's ``kind`` (``write``, ``clone``, ``join``, ``verify``) picks :func:`~airflow_colocate.spark.write_job.run_write`,
:func:`~airflow_colocate.spark.clone_job.run_clone`, :func:`~airflow_colocate.spark.join_job.run_join` or
:func:`~airflow_colocate.spark.verify_job.run_verify`.
The job files themselves (``write_job.py`` …, what the operators submit) run this entry with their
kind, so a plan of another kind is refused there.

Every job keeps one contract with the operators (:mod:`airflow_colocate.operators.base`), which is
why it lives here once: exit 0 with the report written atomically to ``plan.report_uri``, or a
non-zero exit with one line at ``<report_uri>.error`` saying what went wrong, which the operator
raises instead of spark-submit's exit status. Exit 2 means the plan itself was refused (unreadable,
another kind), 1 that the job failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

from airflow_colocate.core.contract import ClonePlan, ImportPlan, JoinPlan, VerifyPlan, WritePlan
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark.failures import executor_error, is_spark_error
from airflow_colocate.storage import fs

PLANS = {"write": WritePlan, "clone": ClonePlan, "join": JoinPlan, "verify": VerifyPlan, "import": ImportPlan}


def log(kind: str, message: str) -> None:
    print(f"colocate-{kind}: {message}", flush=True)


def app_name(plan) -> str:
    """The Spark application name, as the Spark UI and the cluster manager show it."""
    if plan.kind == "write":
        return f"colocate-write {plan.table} {plan.partition_value}"
    return f"colocate-{plan.kind} {plan.job_id}"


def run_plan(spark, plan):
    """Run ``plan`` in ``spark`` and write its report atomically to ``plan.report_uri``.

    A failure raises and writes no report, so a report on disk always means the job finished."""
    started = time.time()
    if plan.kind == "write":
        from airflow_colocate.spark.write_job import run_write

        report = run_write(spark, plan)
    elif plan.kind == "clone":
        from airflow_colocate.spark.clone_job import run_clone

        report = run_clone(spark, plan)
    elif plan.kind == "join":
        from airflow_colocate.spark.join_job import run_join

        report = run_join(spark, plan)
    elif plan.kind == "verify":
        from airflow_colocate.spark.verify_job import run_verify

        report = run_verify(spark, plan)
    elif plan.kind == "import":
        from airflow_colocate.spark.import_job import run_import

        report = run_import(spark, plan)
    else:
        raise ColocateError(f"unknown plan kind {plan.kind!r}: expected one of {', '.join(PLANS)}")
    fs.write_text_atomic(plan.report_uri, report.to_json())
    log(plan.kind, f"report written to {plan.report_uri} ({time.time() - started:.1f}s)")
    return report


def failure_line(plan, exc: BaseException) -> str:
    """What the operator raises: a :class:`ColocateError` says it already; anything else is a bug or
    the cluster, named with the job so the task log points at the traceback above it."""
    if isinstance(exc, ColocateError):
        text = str(exc)
    else:
        reason = executor_error(exc) if is_spark_error(exc) else str(exc)
        text = f"{plan.kind} job {plan.job_id} failed: {type(exc).__name__}: {reason}"
    return " ".join(line.strip() for line in text.splitlines() if line.strip())[:4000] or type(exc).__name__


def _write_error(report_uri: str, line: str) -> None:
    try:
        fs.write_text_atomic(report_uri + ".error", line)
    except Exception as exc:  # the line is in the job log too; a full disk must not hide the cause
        print(f"colocate: could not write {report_uri}.error: {exc}", file=sys.stderr, flush=True)


def read_plan(path: str, expect: str | None = None):
    """The plan in ``path``; raises :class:`ColocateError` for one this entry cannot run, after
    writing the reason to the plan's ``.error`` when the plan at least says where its report goes."""
    try:
        text = fs.read_text(path)
        data = json.loads(text)
    except Exception as exc:
        raise ColocateError(f"cannot read plan {path}: {type(exc).__name__}: {exc}") from exc
    report_uri = data.get("report_uri") if isinstance(data, dict) else None
    kind = data.get("kind") if isinstance(data, dict) else None
    problem = None
    if kind not in PLANS:
        problem = f"{path} is not a job plan (kind {kind!r}; expected one of {', '.join(PLANS)})"
    elif expect is not None and kind != expect:
        problem = f"{path} is a {kind!r} plan, not a {expect} plan"
    else:
        try:
            return PLANS[kind].from_json(text)
        except (TypeError, ValueError, AttributeError) as exc:
            problem = f"{path} is not a valid {kind} plan: {exc}"
    if isinstance(report_uri, str) and report_uri:
        _write_error(report_uri, problem)
    raise ColocateError(problem)


def main(argv: list[str] | None = None, *, kind: str | None = None) -> int:
    """Run one plan file under spark-submit (or plain ``python``); ``kind`` refuses plans of another kind."""
    who = kind or "job"
    parser = argparse.ArgumentParser(
        prog=f"airflow_colocate.spark.{kind + '_job' if kind else 'entry'}",
        description=f"Run one colocate {kind or 'write, clone, join or verify'} plan with Spark and write its report.")
    parser.add_argument("--plan", required=True, help=f"path or URI of the {kind or 'job'} plan JSON")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, $SPARK_MASTER, local[*])")
    args = parser.parse_args(argv)
    try:
        plan = read_plan(args.plan, expect=kind)
    except ColocateError as exc:
        log(who, f"FAILED: {exc}")
        return 2

    from pyspark.sql import SparkSession

    from airflow_colocate.spark.session import get_spark

    fs.delete_file(plan.report_uri + ".error")  # a retry must not be blamed on the last attempt's reason
    owned = SparkSession.getActiveSession() is None  # stop only a session this call started
    spark = get_spark(app_name(plan), master=args.master)
    try:
        run_plan(spark, plan)
    except Exception as exc:
        if not isinstance(exc, ColocateError):
            traceback.print_exc()
        line = failure_line(plan, exc)
        log(plan.kind, f"FAILED: {line}")
        _write_error(plan.report_uri, line)
        return 1
    finally:
        if owned:
            spark.stop()
    return 0


if __name__ == "__main__":
    # Through the importable module, not this file's ``__main__`` copy.
    from airflow_colocate.spark import entry as _entry

    sys.exit(_entry.main())
