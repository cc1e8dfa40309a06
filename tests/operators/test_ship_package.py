"""Every operator run ships the package's zip (--py-files) and the locality jar (--jars), merged
with the user's own: ``py_files``, ``jars`` and a ``spark.submit.pyFiles`` / ``spark.jars`` in
``conf`` (which spark-submit's --py-files / --jars would otherwise replace) all stay."""

from __future__ import annotations

from airflow_colocate.spark.shipping import package_zip
from test_run_job import EchoOperator, FakeHook, fake_spark  # noqa: F401 (fake_spark: a fixture)


def test_the_package_and_the_jar_travel_with_the_users_own(fake_spark, tmp_path, monkeypatch):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    op = EchoOperator(task_id="echo", work=(tmp_path / "w").as_uri(), py_files="/u/helpers.zip",
                      jars="/u/udfs.jar",
                      conf={"spark.submit.pyFiles": "/u/more.py,/u/helpers.zip", "spark.jars": "/u/other.jar"})
    op.execute(context={})
    EchoOperator(task_id="echo", work=(tmp_path / "w2").as_uri()).execute(context={})
    mine, bare = FakeHook.built
    ours = package_zip()
    assert ours.parent == tmp_path / "home" / "cache" / "py"
    assert mine["py_files"] == f"/u/helpers.zip,/u/more.py,{ours}"
    assert mine["jars"] == f"/u/udfs.jar,/u/other.jar,{fake_spark}"
    assert "spark.submit.pyFiles" not in mine["conf"] and "spark.jars" not in mine["conf"]
    assert bare["py_files"] == str(ours) and bare["jars"] == fake_spark
    assert op.conf == {"spark.submit.pyFiles": "/u/more.py,/u/helpers.zip", "spark.jars": "/u/other.jar"}
