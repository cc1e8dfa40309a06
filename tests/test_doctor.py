"""``colocate doctor`` (issue 27): the shape of what it reports, the problems it names one line each
with exit 1, and the order in which the locality jar is looked for."""

from __future__ import annotations

import json

import pytest

from airflow_colocate.cli import main
from airflow_colocate.core.spark_lines import jar_name
from airflow_colocate.spark import locality

TOP = {"package", "python", "pyspark", "java", "jar", "catalog", "backends", "object_stores", "iceberg", "line", "executor",
       "problems"}


def _jar(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    return path


def test_jar_order_env_then_package_then_checkout(monkeypatch, tmp_path):
    name = jar_name(locality.local_line())
    env, packaged = _jar(tmp_path / "env" / name), _jar(tmp_path / "pkg" / name)
    checkout = _jar(tmp_path / "co" / "java" / "colocate-locality" / "build" / name)
    monkeypatch.setattr(locality, "__file__", str(tmp_path / "co" / "airflow_colocate" / "spark" / "locality.py"))
    monkeypatch.setattr(locality, "package_jar", lambda line: packaged)
    monkeypatch.setenv(locality.JAR_ENV, str(env))
    assert locality.find_jar() == (env, "env")  # an explicit setting wins
    monkeypatch.setenv(locality.JAR_ENV, str(tmp_path / "nowhere.jar"))
    assert locality.find_jar() == (packaged, "package")  # a wrong one is passed over (doctor names it)
    monkeypatch.delenv(locality.JAR_ENV)
    assert locality.find_jar() == (packaged, "package") and locality.jar_path() == packaged
    packaged.unlink()
    assert locality.find_jar() == (checkout, "checkout")
    checkout.unlink()
    assert locality.find_jar() is None and locality.jar_path() is None


def test_package_jar_is_inside_the_imported_package():
    import airflow_colocate

    where = locality.package_jar("3.5")
    assert where is not None and where.name == "colocate-locality-spark3.5_2.12.jar" and where.parent.parent == __import__("pathlib").Path(airflow_colocate.__file__).parent


def test_doctor_json_shape(sqlite_catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(locality.JAR_ENV, raising=False)
    from airflow_colocate.jobs.backends import add_backend

    for name in ("be1", "be2"):  # as `colocate backend add` does: each root gets its identity marker
        (tmp_path / name).mkdir()
        add_backend(sqlite_catalog, (tmp_path / name).as_uri(), name=name)
    url = sqlite_catalog.engine.url.render_as_string(hide_password=False)
    assert main(["--catalog", url, "doctor", "--json"]) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert set(report) == TOP and report["problems"] == [] and report["executor"] is None and report["iceberg"] == []
    assert set(report["package"]) == {"version", "location", "editable"} and report["package"]["version"]
    assert report["catalog"]["source"] == "flag" and report["catalog"]["reachable"] is True
    assert report["catalog"]["schema"] == report["catalog"]["code_schema"]
    assert report["pyspark"]["version"] == report["pyspark"]["required"]
    assert isinstance(report["java"]["major"], int) and report["java"]["major"] >= 17
    assert report["jar"]["found"] is True and report["jar"]["origin"] in locality.JAR_ORIGINS
    assert [(b["name"], b["reachable"], b["marker"]["name"], b["error"]) for b in report["backends"]] == \
        [("be1", True, "be1", None), ("be2", True, "be2", None)]

    (tmp_path / "be2" / "_colocate" / "backend.json").unlink()  # a replaced disk
    assert main(["--catalog", url, "doctor", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["backends"][1]["reachable"] is False
    assert captured.err == (f"colocate doctor: backend be2 ({(tmp_path / 'be2').as_uri()}) is not reachable: identity "
                            f"marker _colocate/backend.json is missing under {(tmp_path / 'be2').as_uri()} "
                            f"(a lost or replaced disk)\n")


def test_doctor_hides_the_password_and_names_its_source(monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_CATALOG_URL", "postgresql://colo:s3cret@127.0.0.1:1/colocate")
    assert main(["doctor", "--json"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["catalog"]["source"] == "env" and report["catalog"]["url"] == "postgresql://colo:***@127.0.0.1:1/colocate"
    assert "s3cret" not in captured.out + captured.err
    assert [line for line in captured.err.splitlines() if "catalog" in line][0].startswith(
        "colocate doctor: catalog postgresql://colo:***@127.0.0.1:1/colocate cannot be read:")


def test_doctor_one_line_per_problem(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    monkeypatch.setenv(locality.JAR_ENV, str(tmp_path / "gone.jar"))
    monkeypatch.setattr(locality, "package_jar", lambda line: None)
    monkeypatch.setattr(locality, "__file__", str(tmp_path / "a" / "b" / "c.py"))
    assert main(["doctor"]) == 1
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines == [
        f"colocate doctor: ${locality.JAR_ENV}={tmp_path / 'gone.jar'} is not a file: point it at the locality jar or unset it",
        "colocate doctor: the locality jar is missing: local reads and the ordered bucket read are off (install the "
        "wheel, which carries it, or run scripts/setup.sh in a checkout)",
        f"colocate doctor: catalog sqlite:///{tmp_path / 'home' / 'catalog.db'} does not exist: run 'colocate init' "
        f"(or point --catalog, $COLOCATE_CATALOG_URL or the connection at the catalog)",
    ]
    assert not (tmp_path / "home" / "catalog.db").exists()  # reported, never created
    assert "3 problem(s):" in captured.out and "catalog from:    the embedded SQLite catalog under $COLOCATE_HOME" in captured.out


@pytest.mark.spark
def test_doctor_reports_what_an_executor_sees(spark, sqlite_catalog, capsys):
    """In the test session (doctor uses an active session as it is, and leaves it running)."""
    url = sqlite_catalog.engine.url.render_as_string(hide_password=False)
    assert main(["--catalog", url, "doctor", "--json", "--master", "local[1]"]) == 0, capsys.readouterr().err
    executor = json.loads(capsys.readouterr().out)["executor"]
    assert executor["master"] == spark.sparkContext.master and not spark.sparkContext._jsc.sc().isStopped()
    (seen,) = executor["executors"]
    import sys

    import pyarrow

    assert executor["error"] is None
    assert seen["imports_package"] and seen["pyarrow"] == pyarrow.__version__
    assert seen["python"] == ".".join(map(str, sys.version_info[:3]))


def test_doctor_conn_that_does_not_exist_says_where_it_fell_back(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    assert main(["doctor", "--json", "--conn", "no_such_colocate_conn"]) == 1  # and no catalog there
    catalog = json.loads(capsys.readouterr().out)["catalog"]  # stdout is the JSON alone, Airflow's log aside
    assert catalog["source"] == "default" and catalog["source_detail"] == \
        "embedded default (no Airflow connection no_such_colocate_conn)"
