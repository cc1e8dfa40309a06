"""One way to run a Spark job (operators/base.py): each run builds its own SparkSubmitHook from the
operator's attributes merged with what the job needs, the operator's own attributes stay as the
user wrote them, and save plan -> submit -> load report -> abort on failure lives in one place.

spark-submit is the one seam mocked: a stand-in hook records what it was built with and, as the
job would, writes the report (or the ``.error`` line) the plan names."""

from __future__ import annotations

import copy
import json
import zipfile
from dataclasses import dataclass

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_colocate.core.contract import JsonMixin
from airflow_colocate.core.errors import ColocateError, InvalidArgument
from airflow_colocate.operators import base
from airflow_colocate.operators.balance import ColocateBalanceOperator
from airflow_colocate.operators.base import ColocateSparkOperator
from airflow_colocate.operators.bulk_import import ColocateImportOperator
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.spark_env import job_path
from airflow_colocate.operators.verify import ColocateVerifyOperator
from airflow_colocate.operators.write import ColocateWriteOperator
from airflow_colocate.spark.shipping import package_zip
from airflow_colocate.storage import fs


@dataclass
class EchoPlan(JsonMixin):
    job_id: str
    report_uri: str
    kind: str = "echo"


@dataclass
class EchoReport(JsonMixin):
    job_id: str
    rows: int = 0


class EchoOperator(ColocateSparkOperator):
    job_kind = "echo"
    report_type = EchoReport

    def __init__(self, *, work: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.work = work
        self.aborted: list[BaseException] = []

    def execute(self, context):
        plan = EchoPlan(job_id=f"job-{len(FakeHook.built)}", report_uri=f"{self.work}/job-{len(FakeHook.built)}/report.json")
        return self.run_job(context, plan, on_failure=self.aborted.append)


class FakeHook:
    """Records its keyword arguments; ``submit`` does what the job would (``behaviour``)."""

    built: list[dict] = []
    behaviour = "report"
    during_submit = None  # called inside submit, e.g. a kill arriving while the job runs

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.killed = False
        self._yarn_application_id = "application_1_0001"
        FakeHook.built.append(kwargs)

    def submit(self, application: str = "") -> None:
        args = self.kwargs["application_args"]
        plan = json.loads(fs.read_text(args[args.index("--plan") + 1]))
        self.application = application
        if FakeHook.during_submit is not None:
            FakeHook.during_submit()
        if FakeHook.behaviour == "report":
            fs.write_text_atomic(plan["report_uri"], EchoReport(job_id=plan["job_id"], rows=7).to_json())
        elif FakeHook.behaviour == "error":
            fs.write_text_atomic(plan["report_uri"] + ".error", "echo job failed: the disk is full\n")
            raise RuntimeError("Cannot execute: spark-submit ... Error code is: 1.")
        # "silent": exits 0 and writes nothing

    def on_kill(self) -> None:
        self.killed = True


@pytest.fixture
def fake_spark(monkeypatch, tmp_path):
    monkeypatch.setattr(base, "SparkSubmitHook", FakeHook)
    monkeypatch.setattr(FakeHook, "built", [])
    monkeypatch.setattr(FakeHook, "behaviour", "report")
    monkeypatch.setattr(FakeHook, "during_submit", None)
    jar = tmp_path / "colocate-locality.jar"
    with zipfile.ZipFile(jar, "w") as z:  # a Spark 4 line's jar: it carries the ordered read's extension
        z.writestr("colocate/ordered/ColocateExtensions.class", b"")
    monkeypatch.setenv("COLOCATE_LOCALITY_JAR", str(jar))
    return str(jar)


def user_op(tmp_path, **kw) -> EchoOperator:
    return EchoOperator(
        task_id="echo", work=(tmp_path / "work").as_uri(),
        conf={"spark.sql.extensions": "my.Extensions", "spark.executor.memory": "3g",
              "spark.hadoop.fs.colocatefile.impl": "my.FileSystem", "spark.log.level": "INFO"},
        jars="/opt/user/udfs.jar", py_files="/opt/user/helpers.zip", env_vars={"MY_TOKEN_FILE": "/run/token"},
        application_args=["--master", "local[1]"], **kw)


def test_a_run_merges_the_users_settings_with_the_jobs(fake_spark, tmp_path):
    op = user_op(tmp_path)
    assert op.execute(context={}) == EchoReport(job_id="job-0", rows=7)
    (hook,) = FakeHook.built
    conf = hook["conf"]
    # the user's keys win ...
    assert conf["spark.executor.memory"] == "3g" and conf["spark.log.level"] == "INFO"
    assert conf["spark.hadoop.fs.colocatefile.impl"] == "my.FileSystem"
    # ... except the ones the job needs: the user's extensions joined with the jar's, and waiting
    assert conf["spark.sql.extensions"] == "my.Extensions,colocate.ordered.ColocateExtensions"
    assert conf["spark.standalone.submit.waitAppCompletion"] == "true"
    assert "spark.jars" not in conf
    assert hook["jars"] == f"/opt/user/udfs.jar,{fake_spark}"  # the user's jars alongside the locality jar
    assert hook["py_files"] == f"/opt/user/helpers.zip,{package_zip()}"  # the package travels with the job
    assert hook["env_vars"]["MY_TOKEN_FILE"] == "/run/token" and "PYSPARK_PYTHON" in hook["env_vars"]
    plan_uri = f"{op.work}/job-0/plan.json"
    assert hook["application_args"] == ["--plan", plan_uri, "--kind", "echo", "--master", "local[1]"]
    assert json.loads(fs.read_text(plan_uri))["report_uri"] == f"{op.work}/job-0/report.json"
    assert op.application == job_path() and job_path().endswith("airflow_colocate/spark/entry.py")


def test_without_a_user_log_level_the_job_runs_at_warn(fake_spark, tmp_path):
    EchoOperator(task_id="echo", work=(tmp_path / "w").as_uri()).execute(context={})
    EchoOperator(task_id="echo", work=(tmp_path / "w2").as_uri(), spark_log_level=None).execute(context={})
    first, second = FakeHook.built
    assert first["conf"]["spark.log.level"] == "WARN" and "spark.log.level" not in second["conf"]
    assert first["conf"]["spark.sql.extensions"] == "colocate.ordered.ColocateExtensions"
    assert first["jars"] == fake_spark and first["env_vars"]["PYSPARK_PYTHON"]


def test_the_operators_attributes_are_unchanged_after_runs(fake_spark, tmp_path):
    op = user_op(tmp_path)
    before = {k: copy.deepcopy(getattr(op, k)) for k in ("conf", "jars", "py_files", "env_vars", "application_args")}
    op.execute(context={})
    op.execute(context={})  # a second run starts from what the user wrote, not from the first run's
    assert {k: getattr(op, k) for k in before} == before
    assert op._hook is None  # the provider's own cached hook is never built nor reset
    first, second = FakeHook.built
    assert first["jars"] == second["jars"] == f"/opt/user/udfs.jar,{fake_spark}"
    assert first["conf"] == second["conf"] and first["env_vars"] == second["env_vars"]
    assert second["application_args"][-2:] == ["--master", "local[1]"] and second["application_args"].count("--plan") == 1


def test_the_runs_hook_has_the_operators_other_settings(monkeypatch):
    """Every other SparkSubmitHook argument is the operator's, as the provider's own _get_hook
    builds it: a provider version that renames an attribute fails here, not in production."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(
        {"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": {"deploy-mode": "client"}}))
    op = ColocateWriteOperator(
        task_id="w", table="t", conn_id="spark_cluster", files="a.txt", py_files="b.zip", archives="c.tgz",
        driver_class_path="/d", java_class="E", packages="g:a:1", exclude_packages="g:x", repositories="https://r",
        total_executor_cores=3, executor_cores=2, executor_memory="2g", driver_memory="1g", keytab="/k",
        principal="p@R", proxy_user="u", name="n", num_executors=4, status_poll_interval=5, verbose=True,
        spark_binary="spark3-submit", properties_file="/p.conf", yarn_queue="q", deploy_mode="client",
        post_submit_commands=["true"], conf={"spark.x": "1"}, jars="/j.jar", env_vars={"A": "1"},
        application_args=["--master", "local[1]"])
    for op in (op, ColocateWriteOperator(task_id="bare", table="t", source="/x")):  # every setting, then none
        ours = vars(SparkSubmitHook(**op._hook_kwargs()))
        theirs = vars(op._get_hook())
        assert set(ours) == set(theirs)
        differ = {k for k in ours if k not in ("_log",) and ours[k] != theirs[k]}
        assert differ == set(), differ


def test_a_failed_job_raises_its_own_line_and_aborts_once(fake_spark, tmp_path):
    op = user_op(tmp_path)
    FakeHook.behaviour = "error"
    with pytest.raises(ColocateError, match="^echo job failed: the disk is full$"):
        op.execute(context={})
    assert len(op.aborted) == 1 and isinstance(op.aborted[0], ColocateError)
    FakeHook.behaviour = "silent"  # spark-submit exit 0 and no report: never a commit
    with pytest.raises(ColocateError, match="without writing its report"):
        op.execute(context={})
    assert len(op.aborted) == 2


def test_on_kill_kills_the_run_in_progress_and_spark_ui_names_its_application(fake_spark, tmp_path, monkeypatch):
    op = user_op(tmp_path)
    FakeHook.during_submit = op.on_kill  # the task is killed while spark-submit runs
    op.execute(context={})
    assert op._spark_hook.killed and op._spark_hook.kwargs is FakeHook.built[0] and op._hook is None
    monkeypatch.setenv("COLOCATE_SPARK_HISTORY_URL", "http://history:18080")
    assert op.spark_ui() == "http://history:18080/history/application_1_0001/jobs/"
    EchoOperator(task_id="idle", work="/nowhere").on_kill()  # nothing runs: nothing to kill


def test_options_that_end_spark_submit_before_the_job_are_refused(fake_spark, tmp_path):
    op = EchoOperator(task_id="echo", work=(tmp_path / "w").as_uri(), yarn_track_via_rm_api=True)
    with pytest.raises(InvalidArgument, match="yarn_track_via_rm_api"):
        op.execute(context={})
    assert FakeHook.built == [] and len(op.aborted) == 1


def test_a_plan_of_another_kind_is_refused_before_submit(fake_spark, tmp_path):
    op = ColocateVerifyOperator(task_id="v")
    with pytest.raises(ColocateError, match="runs verify plans, not 'echo'"):
        op.run_job({}, EchoPlan(job_id="x", report_uri=f"{(tmp_path / 'w').as_uri()}/x/report.json"))
    assert FakeHook.built == []


@pytest.mark.parametrize("cls,kind", [(ColocateWriteOperator, "write"), (ColocateJoinOperator, "join"),
                                      (ColocateBalanceOperator, "clone"), (ColocateVerifyOperator, "verify"),
                                      (ColocateImportOperator, "import")])
def test_every_operator_declares_its_job_and_extends_the_parents_templates(cls, kind):
    assert cls.job_kind == kind and cls.report_type.__name__.endswith("Report")
    assert set(SparkSubmitOperator.template_fields) <= set(cls.template_fields)


def test_the_s3_connection_reaches_the_job_as_its_environment_never_its_plan_or_log(fake_spark, tmp_path, monkeypatch,
                                                                                      caplog):
    """The ``colocate_s3`` connection (type aws) becomes the AWS_* variables of the submitted job and
    of the task's own process; the secret is in no plan file and no log line. The user's own
    env_vars win."""
    secret = "s3-secret-never-logged-0123"
    monkeypatch.setenv("AIRFLOW_CONN_COLOCATE_S3", json.dumps(
        {"conn_type": "aws", "login": "AKIATEST", "password": secret,
         "extra": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}}))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.setenv(name, "")  # recorded as unset, so what the task puts there goes at teardown
        monkeypatch.delenv(name)      # (a delenv of an unset name records nothing: the key leaked to later tests)
    op = user_op(tmp_path)
    op.env_vars["AWS_REGION"] = "us-east-2"
    with caplog.at_level("DEBUG"):
        op.execute(context={})
    (hook,) = FakeHook.built
    env = hook["env_vars"]
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("AKIATEST", secret)
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000" and env["AWS_REGION"] == "us-east-2"
    import os

    assert os.environ["AWS_SECRET_ACCESS_KEY"] == secret  # the task's control plane reads the store too
    assert secret not in caplog.text
    assert all(secret not in p.read_text(errors="replace") for p in (tmp_path / "work").rglob("*") if p.is_file())
