"""What the colocate operators share: one way to run a planned Spark job (save the plan, submit it,
load the report, abort on failure), the catalog connection, and a readable end of the task log.

Each run builds its own :class:`SparkSubmitHook` from the operator's attributes merged with what
the job needs, instead of rewriting the inherited ``conf``/``jars``/``env_vars``/``application_args``
and resetting the provider's cached hook: a second run (a retry in the same process, a balance
that clones twice) starts from what the user wrote, and the provider's private state, which
changes between its versions, is not ours to reset.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_colocate.core.errors import ColocateError, InvalidArgument
from airflow_colocate.core.spark_lines import jar_name
from airflow_colocate.hooks.catalog import ColocateCatalogHook
from airflow_colocate.hooks import object_store
from airflow_colocate.jobs.full_disk import full_backend, work_dir_full
from airflow_colocate.operators.spark_env import cluster_line, job_path, submit_env
from airflow_colocate.operators.spark_ui import history_url
from airflow_colocate.spark import object_stores
from airflow_colocate.spark.locality import locality_conf
from airflow_colocate.spark.shipping import with_package
from airflow_colocate.storage import fs, plan_files

LOG_LEVEL_CONF = "spark.log.level"  # Spark >= 3.5: the root log level from SparkContext start
SPARK_LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
DEFAULT_SPARK_LOG_LEVEL = "WARN"
EXTENSIONS_CONF = "spark.sql.extensions"
JARS_CONF = "spark.jars"
PY_FILES_CONF = "spark.submit.pyFiles"
# A standalone master in cluster deploy mode lets spark-submit return once the driver is accepted;
# the report is read when spark-submit returns, so it must wait for the driver (ignored elsewhere).
WAIT_CONF = "spark.standalone.submit.waitAppCompletion"
# Provider options that end spark-submit before the job does and poll from the operator instead:
# the report would be read before it exists.
EARLY_EXIT_OPTIONS = ("track_driver_via_k8s_api", "yarn_track_via_rm_api")
_HOOK_PARAMS = tuple(p for p in inspect.signature(SparkSubmitHook.__init__).parameters if p != "self")


class ColocateSparkOperator(SparkSubmitOperator):
    """A SparkSubmitOperator that runs :mod:`airflow_colocate.spark.entry` with ``--plan <uri>
    --kind <job_kind>`` and answers with a report of ``report_type``.

    A subclass sets ``job_kind`` and ``report_type``, plans in ``execute`` through ``self.catalog``
    and ``self.work_dir``, and calls :meth:`run_job` (directly, or as the runner a ``jobs/``
    function takes), giving the abort of its own plan as ``on_failure``.

    :param spark_log_level: Spark's log level for the job (``spark.log.level``): ``WARN`` by
        default, so the task log holds our lines and Spark's warnings rather than ~500 lines of
        Spark INFO; ``INFO`` or ``DEBUG`` to see everything, None to leave it to the cluster's
        log4j2 configuration. A ``spark.log.level`` in ``conf`` wins.
    :param colocate_conn_id: the catalog connection (:class:`ColocateCatalogHook`).
    :param s3_conn_id: the connection of the S3 backends' key and address
        (:mod:`airflow_colocate.hooks.object_store`; type ``aws``); when it is not defined, the
        worker's environment or the AWS SDK's default chain.

    The job's needs are merged with the user's ``conf``, ``jars``, ``py_files``, ``env_vars`` and
    ``application_args``, never replacing them: the user's conf keys win except
    ``spark.sql.extensions`` (the user's extensions joined with the locality jar's) and
    ``spark.standalone.submit.waitAppCompletion``; the user's jars are shipped alongside the
    locality jar, and the user's ``py_files`` before this package's zip (the executors of a cluster
    that never installed the package import it from there, :mod:`airflow_colocate.spark.shipping`);
    the user's environment is kept; the user's application arguments follow ours.
    """

    job_kind: ClassVar[str] = ""  # the plan kind spark/entry.py runs: write, join, clone, verify, import
    report_type: ClassVar[type | None] = None  # the report dataclass the job writes

    def __init__(self, *, spark_log_level: str | None = DEFAULT_SPARK_LOG_LEVEL,
                 colocate_conn_id: str = ColocateCatalogHook.default_conn_name,
                 s3_conn_id: str | None = object_store.DEFAULT_CONN_ID, **kwargs: Any) -> None:
        kwargs.setdefault("application", job_path())
        kwargs.setdefault("name", f"colocate-{self.job_kind or 'job'}-{kwargs.get('task_id', self.job_kind)}")
        # spark-submit's settings as given: the provider keeps most of them in private attributes
        self._submit_settings = {k: v for k, v in kwargs.items() if k in _HOOK_PARAMS}
        super().__init__(**kwargs)
        if spark_log_level is not None and str(spark_log_level).upper() not in SPARK_LOG_LEVELS:
            raise InvalidArgument(f"invalid spark_log_level {spark_log_level!r}: expected one of "
                                  f"{', '.join(SPARK_LOG_LEVELS)} (or None for the cluster's own log4j2 setting)")
        self.spark_log_level = None if spark_log_level is None else str(spark_log_level).upper()
        self.colocate_conn_id = colocate_conn_id
        self.s3_conn_id = s3_conn_id
        self._catalog_hook: ColocateCatalogHook | None = None
        self._spark_hook: SparkSubmitHook | None = None  # the run in progress, or the last one
        self._spark_conf: dict[str, Any] = {}

    # -- the catalog connection ----------------------------------------------------------------

    @property
    def catalog_hook(self) -> ColocateCatalogHook:
        if self._catalog_hook is None:
            self._catalog_hook = ColocateCatalogHook(self.colocate_conn_id)
            object_store.apply(self.s3_conn_id)  # the task's own reads and copies of S3 backends
        return self._catalog_hook

    @property
    def catalog(self):
        return self.catalog_hook.get_conn()

    @property
    def work_dir(self) -> str:
        """Where plans and reports are exchanged with Spark (shared storage in cluster deploy mode):
        a path or URI string, never a ``Path``, so ``hdfs://`` survives."""
        return self.catalog_hook.work_dir()

    # -- one Spark job ---------------------------------------------------------------------------

    def run_job(self, context, plan, *, on_failure: Callable[[BaseException], None] | None = None):
        """Save ``plan`` next to its report, submit it, and return its report; on any failure
        (the job's, a kill, an unreadable report) call ``on_failure`` with it, then re-raise, so a
        subclass's abort lives in one place and always runs."""
        try:
            if plan.kind != self.job_kind:
                raise ColocateError(f"{type(self).__name__} runs {self.job_kind} plans, not {plan.kind!r}")
            plan_uri = plan_files.save_plan(plan, plan_uri_of(plan))
            self.submit(context, plan_uri, plan.report_uri)
            if not fs.exists(plan.report_uri):
                raise work_dir_full(plan.report_uri) or ColocateError(
                    f"the Spark job ended without writing its report {plan.report_uri}")
            return plan_files.load_report(self.report_type, plan.report_uri)
        except BaseException as exc:
            if on_failure is not None:
                on_failure(exc)
            full = full_backend(lambda: self.catalog, exc, f"the {plan.kind} job {plan.job_id}")  # named, not a bare root
            if full is not None:
                raise full from exc
            raise

    def submit(self, context, plan_uri: str, report_uri: str) -> None:
        """spark-submit the application for ``plan_uri`` with this run's own hook; turn a failure
        into the job's one-line reason when it left one (:mod:`airflow_colocate.spark.entry`
        writes it to ``<report_uri>.error``)."""
        hook = self.spark_hook(context, plan_uri)
        self._spark_hook = hook
        try:
            hook.submit(self.application)
        except Exception as exc:
            error_uri = report_uri + ".error"
            if fs.exists(error_uri):
                raise ColocateError(fs.read_text(error_uri).strip()) from exc
            full = work_dir_full(report_uri)  # no room even for the one-line reason
            if full is not None:
                raise full from exc
            raise

    def spark_hook(self, context, plan_uri: str) -> SparkSubmitHook:
        """A new hook: the operator's spark-submit settings with this run's conf, jars, environment
        and arguments merged in (see the class docstring); the operator itself is left as it is."""
        kwargs = self._hook_kwargs()
        for option in EARLY_EXIT_OPTIONS:
            if kwargs.get(option):
                raise InvalidArgument(f"{option}=True is not supported by colocate operators: spark-submit would "
                                      "return before the job writes its report")
        given = self.env_vars if isinstance(self.env_vars, dict) else {}
        env = submit_env({**object_store.apply(self.s3_conn_id), **given})
        line = cluster_line(kwargs.get("conn_id"), kwargs.get("spark_binary"), env)
        self.log.info("colocate: the cluster runs Spark %s (Scala %s): shipping %s", line.line, line.scala,
                      jar_name(line.line))
        conf, jars = self.job_conf(context, line.line)
        self._spark_conf = conf
        args = ["--plan", plan_uri, "--kind", self.job_kind, *(self.application_args or [])]
        # spark-submit's --py-files / --jars replace a spark.submit.pyFiles / spark.jars in --conf: join them
        py_files = with_package(joined(kwargs.get("py_files"), conf.pop(PY_FILES_CONF, None)))
        return SparkSubmitHook(**{**kwargs, "conf": conf, "jars": jars, "py_files": py_files, "application_args": args,
                                  "env_vars": env})

    def job_conf(self, context, line: str | None = None) -> tuple[dict[str, Any], str | None]:
        """The Spark conf and ``--jars`` of one run: the locality jar's settings under the user's,
        the user's extensions joined with the jar's, the log level unless the user set one; the
        user's jars (``jars`` and a ``spark.jars`` in ``conf``) with the locality jar of Spark
        ``line`` (the cluster's, :func:`~airflow_colocate.operators.spark_env.cluster_line`)."""
        user = dict(self.conf or {})
        if getattr(self, "_openlineage_inject_parent_job_info", False):
            from airflow.providers.common.compat.openlineage.utils.spark import (
                inject_parent_job_information_into_spark_properties)

            user = inject_parent_job_information_into_spark_properties(user, context)
        if getattr(self, "_openlineage_inject_transport_info", False):
            from airflow.providers.common.compat.openlineage.utils.spark import (
                inject_transport_information_into_spark_properties)

            user = inject_transport_information_into_spark_properties(user, context)
        user_jars = joined(self.jars, user.pop(JARS_CONF, None))
        ship = locality_conf(user_jars, user.get(EXTENSIONS_CONF), line)
        jars = ship.pop(JARS_CONF, None) or user_jars
        if line and object_stores.wanted():
            # hadoop-aws of the cluster's line: the driver's classpath is fixed when spark-submit
            # starts it, so a spark.jars the job's session sets later reaches the executors only
            jars = joined(jars, *object_stores.jars(line))
        conf = {**ship, **user}
        if EXTENSIONS_CONF in ship:
            conf[EXTENSIONS_CONF] = ship[EXTENSIONS_CONF]
        if self.spark_log_level and LOG_LEVEL_CONF not in conf:
            conf[LOG_LEVEL_CONF] = self.spark_log_level
        conf[WAIT_CONF] = "true"
        return conf, jars

    def _hook_kwargs(self) -> dict[str, Any]:
        """The operator's value of every SparkSubmitHook parameter: the public attribute of that
        name where the provider keeps one (a templated field, rendered by now), else the value
        given to the constructor; one never given keeps the hook's default. The provider's private
        attributes are never read (tests/operators/test_run_job.py checks the hook equals the one
        the provider would build, given every setting and given none)."""
        kwargs = {}
        for name in _HOOK_PARAMS:
            if name in vars(self):
                kwargs[name] = getattr(self, name)
            elif name in self._submit_settings:
                kwargs[name] = self._submit_settings[name]
        return kwargs

    def on_kill(self) -> None:
        """Kill the run in progress (its own hook), not a hook built afresh from the attributes."""
        if self._spark_hook is not None:
            self._spark_hook.on_kill()

    def spark_ui(self) -> str | None:
        """The Spark history server page of the job just run, when one is configured (spark_ui.py)."""
        hook = self._spark_hook
        return history_url(self._spark_conf or self.conf, getattr(hook, "_yarn_application_id", None))

    def log_summary(self, lines: Iterable[str]) -> None:
        """The task log's last lines of ours, one log line each (a log viewer keeps them readable)."""
        self.log.info("colocate: ---- summary ----")
        for line in lines:
            self.log.info("colocate: %s", line)


def joined(*lists: str | None) -> str | None:
    """Comma-separated lists as one, each entry once, in order (None: empty)."""
    out: list[str] = []
    for value in lists:
        for item in str(value or "").split(","):
            if item.strip() and item.strip() not in out:
                out.append(item.strip())
    return ",".join(out) or None


def plan_uri_of(plan) -> str:
    """Where a plan is saved: beside the report it names (``<work dir>/<job>/plan.json``)."""
    return fs.join(fs.parent(plan.report_uri), "plan.json")


def backend_names(catalog) -> dict[int, str]:
    """Backend id -> name, for the summaries' ``backends`` column."""
    return {b.id: b.name for b in catalog.backends.list()}
