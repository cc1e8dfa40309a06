"""What the colocate operators share: running one planned Spark job through ``spark-submit``, quietly,
and ending the task log with a readable summary."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_colocate.core.errors import ColocateError, InvalidArgument
from airflow_colocate.operators.spark_env import submit_env
from airflow_colocate.operators.spark_ui import history_url
from airflow_colocate.spark.locality import locality_conf

LOG_LEVEL_CONF = "spark.log.level"  # Spark >= 3.5: the root log level from SparkContext start
SPARK_LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
DEFAULT_SPARK_LOG_LEVEL = "WARN"


class ColocateSparkOperator(SparkSubmitOperator):
    """A SparkSubmitOperator whose application gets ``--plan <json>`` and answers with a report.

    :param spark_log_level: Spark's log level for the job (``spark.log.level``): ``WARN`` by
        default, so the task log holds our lines and Spark's warnings rather than ~500 lines of
        Spark INFO; ``INFO`` or ``DEBUG`` to see everything, None to leave it to the cluster's
        log4j2 configuration. A ``spark.log.level`` in ``conf`` wins.
    """

    def __init__(self, *, spark_log_level: str | None = DEFAULT_SPARK_LOG_LEVEL, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if spark_log_level is not None and str(spark_log_level).upper() not in SPARK_LOG_LEVELS:
            raise InvalidArgument(f"invalid spark_log_level {spark_log_level!r}: expected one of "
                                  f"{', '.join(SPARK_LOG_LEVELS)} (or None for the cluster's own log4j2 setting)")
        self.spark_log_level = None if spark_log_level is None else str(spark_log_level).upper()

    def run_plan(self, context, plan_path: Path, report_uri: str) -> None:
        """Submit the job; turn its failure into the job's own one-line reason when it left one
        (:mod:`airflow_colocate.spark.entry` writes it to ``<report_uri>.error``)."""
        self.application_args = ["--plan", str(plan_path)]
        self.env_vars = submit_env(self.env_vars if isinstance(self.env_vars, dict) else None)
        # the locality jar (when built) on the job's classpath, and its file system's settings
        ship = locality_conf(self.jars, (self.conf or {}).get("spark.sql.extensions"))
        self.jars = ship.pop("spark.jars", None) or self.jars
        self.conf = {**ship, **(self.conf or {})}
        if "spark.sql.extensions" in ship:  # the job's own extensions joined with the jar's
            self.conf["spark.sql.extensions"] = ship["spark.sql.extensions"]
        conf = dict(self.conf or {})
        if self.spark_log_level and LOG_LEVEL_CONF not in conf:
            conf[LOG_LEVEL_CONF] = self.spark_log_level
        self.conf = conf
        self._hook = None  # built from the attributes above at execute time
        error_file = Path(report_uri.removeprefix("file://") + ".error")
        try:
            super().execute(context)
        except Exception as exc:
            if error_file.exists():
                raise ColocateError(error_file.read_text().strip()) from exc
            raise

    def spark_ui(self) -> str | None:
        """The Spark history server page of the job just run, when one is configured (spark_ui.py)."""
        hook = getattr(self, "_hook", None)
        return history_url(self.conf, getattr(hook, "_yarn_application_id", None))

    def log_summary(self, lines: Iterable[str]) -> None:
        """The task log's last lines of ours, one log line each (a log viewer keeps them readable)."""
        self.log.info("colocate: ---- summary ----")
        for line in lines:
            self.log.info("colocate: %s", line)


def backend_names(catalog) -> dict[int, str]:
    """Backend id -> name, for the summaries' ``backends`` column."""
    return {b.id: b.name for b in catalog.backends()}
