"""The one entry of every Spark job: a plan file in, a report (or one error line) out.

Launch::

    spark-submit [--master …] …/airflow_colocate/spark/entry.py --plan file:///…/plan.json [--kind write]
    python -m airflow_colocate.spark.entry --plan /…/plan.json [--kind write] [--master local[2]]

The plan's ``kind`` picks its job from :data:`JOBS`; ``--kind`` (what the operators pass) refuses a
plan of another kind. The job modules have no ``__main__`` of their own: this is the only
application, so the functions shipped to executors are pickled by reference to the installed
package.

**Adding a job kind** is one entry in :data:`JOBS` (kind -> plan class, ``"module:function"``)
plus the job module, whose ``run_<kind>(spark, plan) -> report`` the entry loads only when a plan
of that kind runs (a driver imports the one job it runs).

Every job keeps one contract with the operators (:mod:`airflow_colocate.operators.base`), which is
why it lives here once: exit 0 with the report written atomically to ``plan.report_uri``, or a
non-zero exit with one line at ``<report_uri>.error`` saying what went wrong, which the operator
raises instead of spark-submit's exit status. Exit 2 means the plan itself was refused (unreadable,
another kind), 1 that the job failed.

The jobs log through :mod:`logging` under ``airflow_colocate`` (``airflow_colocate.spark.<kind>``).
Run as the application, :func:`main` shows those records on stdout as ``colocate-<kind>: message``
lines, the task log's and spark-submit's output; called in a user's session, the jobs add no
handler and print nothing.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and sys.version_info < (3, 10):  # core/spark_lines.py: MIN_PYTHON, and why
    # Refused before any import that an old interpreter could fail on, in one line: on stderr, and
    # where the operator looks for the job's reason (<report_uri>.error beside a local plan file).
    _why = (f"Python {sys.version.split()[0]} is too old for airflow-colocate's Spark jobs (they need 3.10 or newer): "
            f"set PYSPARK_PYTHON (executors) and PYSPARK_DRIVER_PYTHON (driver) to a Python 3.10+ on the cluster")
    try:
        import json as _json

        _plan = sys.argv[sys.argv.index("--plan") + 1]
        with open(_plan[len("file://"):] if _plan.startswith("file://") else _plan) as _f:
            _report = _json.load(_f)["report_uri"]
        with open((_report[len("file://"):] if _report.startswith("file://") else _report) + ".error", "w") as _f:
            _f.write(_why + "\n")
    except Exception:  # a plan elsewhere than a local file: stderr has the line
        pass
    print(f"FAILED: {_why}", file=sys.stderr)
    sys.exit(2)

import argparse
import importlib
import json
import logging
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from airflow_colocate.core.contract import ClonePlan, ImportPlan, JoinPlan, VerifyPlan, WritePlan
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark.failures import executor_error, is_spark_error
from airflow_colocate.storage import fs
from airflow_colocate.storage.plan_files import save_report

# kind -> (plan class, "module:function" that runs it); the order is the one error lines list.
JOBS: dict[str, tuple[type, str]] = {
    "write": (WritePlan, "airflow_colocate.spark.write_job:run_write"),
    "clone": (ClonePlan, "airflow_colocate.spark.clone_job:run_clone"),
    "join": (JoinPlan, "airflow_colocate.spark.join_job:run_join"),
    "verify": (VerifyPlan, "airflow_colocate.spark.verify_job:run_verify"),
    "import": (ImportPlan, "airflow_colocate.spark.import_job:run_import"),
}


def runner(kind: str) -> Callable:
    """The ``run_<kind>(spark, plan)`` of ``kind``, imported now (not when the entry loads)."""
    if kind not in JOBS:
        raise ColocateError(f"unknown plan kind {kind!r}: expected one of {', '.join(JOBS)}")
    module, _, function = JOBS[kind][1].partition(":")
    return getattr(importlib.import_module(module), function)


def logger(kind: str) -> logging.Logger:
    """The logger of a job kind: its records show as ``colocate-<kind>: …`` lines."""
    return logging.getLogger(f"airflow_colocate.spark.{kind}")


class _JobLines(logging.Formatter):
    """``colocate-<kind>: message``, the kind being the logger name's last part."""

    def format(self, record: logging.LogRecord) -> str:
        return f"colocate-{record.name.rpartition('.')[2]}: {record.getMessage()}"


class _Stdout(logging.StreamHandler):
    """Writes to ``sys.stdout`` as it is when a line is logged (a test's capture, a redirect)."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, _value) -> None:
        pass


@contextmanager
def job_lines() -> Iterator[None]:
    """While the application runs: the package's INFO records as ``colocate-<kind>: …`` lines on
    stdout, through one handler that is removed again afterwards (an in-process caller, a test,
    gets its logging back as it was)."""
    root = logging.getLogger("airflow_colocate")
    if any(isinstance(h, _Stdout) for h in root.handlers):  # main() inside main(): one handler
        yield
        return
    handler = _Stdout()
    handler.setFormatter(_JobLines())
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def app_name(plan) -> str:
    """The Spark application name, as the Spark UI and the cluster manager show it."""
    if plan.kind == "write":
        return f"colocate-write {plan.table} {plan.partition_value}"
    return f"colocate-{plan.kind} {plan.job_id}"


def run_plan(spark, plan):
    """Run ``plan`` in ``spark`` and write its report atomically to ``plan.report_uri``.

    A failure raises and writes no report, so a report on disk always means the job finished."""
    started = time.time()
    report = runner(plan.kind)(spark, plan)
    save_report(report, plan.report_uri)
    logger(plan.kind).info("report written to %s (%.1fs)", plan.report_uri, time.time() - started)
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
    if kind not in JOBS:
        problem = f"{path} is not a job plan (kind {kind!r}; expected one of {', '.join(JOBS)})"
    elif expect is not None and kind != expect:
        problem = f"{path} is a {kind!r} plan, not a {expect} plan"
    else:
        try:
            return JOBS[kind][0].from_json(text)
        except (TypeError, ValueError, AttributeError) as exc:
            problem = f"{path} is not a valid {kind} plan: {exc}"
    if isinstance(report_uri, str) and report_uri:
        _write_error(report_uri, problem)
    raise ColocateError(problem)


def check_line(spark) -> None:
    """Refuse a Spark line this package has no jar and no job code for, before any work; say once
    what the line runs without (:func:`airflow_colocate.spark.locality.announce_line`)."""
    from airflow_colocate.core.spark_lines import UnsupportedLine, spark_line
    from airflow_colocate.spark.locality import announce_line

    try:
        spark_line(spark.version)
    except UnsupportedLine as exc:
        raise ColocateError(str(exc)) from None
    announce_line(spark)


def main(argv: list[str] | None = None, *, kind: str | None = None) -> int:
    """Run one plan file under spark-submit (or plain ``python``); ``kind`` (or ``--kind``) refuses
    plans of another kind."""
    parser = argparse.ArgumentParser(
        prog="airflow_colocate.spark.entry",
        description=f"Run one colocate {' / '.join(JOBS)} plan with Spark and write its report.")
    parser.add_argument("--plan", required=True, help="path or URI of the job plan JSON")
    parser.add_argument("--kind", default=kind,
                        help=f"refuse a plan of another kind (one of {', '.join(JOBS)}); default: any")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, $SPARK_MASTER, local[*])")
    args = parser.parse_args(argv)
    with job_lines():
        return _run_file(args.plan, args.kind, args.master)


def _run_file(path: str, kind: str | None, master: str | None) -> int:
    try:
        plan = read_plan(path, expect=kind)
    except ColocateError as exc:
        logger(kind or "job").error("FAILED: %s", exc)
        return 2

    from pyspark.sql import SparkSession

    from airflow_colocate.spark.session import get_spark

    fs.delete_file(plan.report_uri + ".error")  # a retry must not be blamed on the last attempt's reason
    owned = SparkSession.getActiveSession() is None  # stop only a session this call started
    spark = get_spark(app_name(plan), master=master)
    try:
        check_line(spark)
        run_plan(spark, plan)
    except Exception as exc:
        if not isinstance(exc, ColocateError):
            traceback.print_exc()
        line = failure_line(plan, exc)
        logger(plan.kind).error("FAILED: %s", line)
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
