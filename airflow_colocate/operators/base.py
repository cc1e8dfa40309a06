"""What the colocate operators share: running one planned Spark job through ``spark-submit``."""

from __future__ import annotations

from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.operators.spark_env import submit_env


class ColocateSparkOperator(SparkSubmitOperator):
    """A SparkSubmitOperator whose application gets ``--plan <json>`` and answers with a report."""

    def run_plan(self, context, plan_path: Path, report_uri: str) -> None:
        """Submit the job; turn its failure into the job's own one-line reason when it left one
        (:mod:`airflow_colocate.spark.entry` writes it to ``<report_uri>.error``)."""
        self.application_args = ["--plan", str(plan_path)]
        self.env_vars = submit_env(self.env_vars if isinstance(self.env_vars, dict) else None)
        self._hook = None  # built from the attributes above at execute time
        error_file = Path(report_uri.removeprefix("file://") + ".error")
        try:
            super().execute(context)
        except Exception as exc:
            if error_file.exists():
                raise ColocateError(error_file.read_text().strip()) from exc
            raise
