"""Issue 42: the cluster's Spark line is known, never guessed, and what cannot run is refused in one
line. No Spark here: the connection's ``spark_version`` extra, a spark-submit's ``--version`` (a
stand-in script, cached per binary), a line without a jar, and a Python older than 3.10 running
the job entry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.spark_lines import LINES, UnsupportedLine, jar_name, line_of, python_refusal, spark_line
from airflow_colocate.operators.spark_env import cluster_line
from airflow_colocate.spark import lines
from airflow_colocate.spark.locality import find_jar

ENTRY = Path(__file__).resolve().parents[2] / "airflow_colocate" / "spark" / "entry.py"


def spark_conn(monkeypatch, **extra) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LINES_TEST", json.dumps(
        {"conn_type": "spark", "host": "spark://somewhere", "port": 7077, "extra": extra}))


def fake_submit(folder: Path, version: str) -> Path:
    """A spark-submit that prints its version as Spark's does (to stderr) and counts its calls."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "spark-submit"
    script.write_text(f"#!/bin/sh\necho x >> {folder / 'calls'}\necho 'Welcome to ... version {version}' >&2\n")
    script.chmod(0o755)
    return script


def test_every_line_has_a_jar_and_the_lines_are_parsed():
    assert [line_of(v) for v in ("3.5.6", "4.3.0", "4.0.0-SNAPSHOT", "4.1")] == ["3.5", "4.3", "4.0", "4.1"]
    assert {spark_line(f"{line}.1").scala for line in LINES} == {"2.12", "2.13"}
    for line in LINES:  # built by scripts/setup.sh (and carried by the wheel: tests/test_wheel.py)
        found = find_jar(line)
        assert found is not None and found.path.name == jar_name(line), line
    with pytest.raises(UnsupportedLine, match=r"^Spark 3\.4\.4 \(line 3\.4\) is not supported: .*3\.5, 4\.0, 4\.1, 4\.2, 4\.3"):
        spark_line("3.4.4")


def test_the_connection_extra_names_the_line(monkeypatch, tmp_path):
    spark_conn(monkeypatch, spark_version="3.5.6")
    # no spark-submit is asked: the extra is what the platform team knows
    assert cluster_line("spark_lines_test", None, {"PATH": str(tmp_path)}).line == "3.5"


def test_a_line_without_a_jar_is_refused_in_one_line(monkeypatch, tmp_path):
    spark_conn(monkeypatch, spark_version="3.4.1")
    with pytest.raises(ColocateError) as info:
        cluster_line("spark_lines_test", None, {"PATH": str(tmp_path)})
    message = str(info.value)
    assert "\n" not in message and message.startswith("Spark 3.4.1 (line 3.4) is not supported")
    assert message.endswith("(from connection 'spark_lines_test' extra spark_version='3.4.1')")


def test_else_the_binary_the_connection_names_is_asked_once(monkeypatch, tmp_path):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    spark_conn(monkeypatch, **{"spark-binary": "spark3-submit"})
    bin_dir = tmp_path / "bin"
    fake_submit(bin_dir, "4.3.0").rename(bin_dir / "spark3-submit")
    env = {"PATH": str(bin_dir)}
    assert cluster_line("spark_lines_test", None, env).line == "4.3"
    assert cluster_line("spark_lines_test", None, env).line == "4.3"
    assert (bin_dir / "calls").read_text().count("x") == 1  # cached per binary
    cache = json.loads((tmp_path / "home" / "cache" / "spark-versions.json").read_text())
    assert list(cache.values()) == ["4.3.0"]
    # the operator's own spark_binary wins over the connection's
    fake_submit(tmp_path / "other", "3.5.9")
    assert cluster_line("spark_lines_test", "spark-submit", {"PATH": str(tmp_path / "other")}).line == "3.5"


def test_no_version_and_no_binary_is_refused_in_one_line_that_says_how(monkeypatch, tmp_path):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    spark_conn(monkeypatch)
    with pytest.raises(ColocateError) as info:
        cluster_line("spark_lines_test", None, {"PATH": str(tmp_path / "empty")})
    assert str(info.value) == ("the Spark version of the cluster behind connection 'spark_lines_test' is unknown "
                               "(no spark-submit on PATH): set its extra {\"spark_version\": \"3.5.6\"} "
                               "(the cluster's Spark version)")
    silent = tmp_path / "silent"
    silent.mkdir()
    (silent / "spark-submit").write_text("#!/bin/sh\nexit 1\n")
    (silent / "spark-submit").chmod(0o755)
    with pytest.raises(ColocateError, match=r"--version printed none\): set its extra"):
        lines.submit_line(None, None, str(silent), "connection 'x'")


def _old_python() -> str | None:
    for name in ("python3.9", "python3.8"):
        found = shutil.which(name)
        if found and subprocess.run([found, "-c", "import sys; sys.exit(sys.version_info >= (3, 10))"]).returncode == 0:
            return found
    pyenv = sorted(Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob("versions/3.[89].*/bin/python"))
    return str(pyenv[-1]) if pyenv else None


def test_an_old_python_is_refused_in_one_line_before_any_work(tmp_path):
    assert python_refusal((3, 10, 0)) is None and python_refusal((3, 9, 18)).startswith("Python 3.9.18 is too old")
    old = _old_python()
    if old is None:
        pytest.skip("no Python older than 3.10 on this machine to run the entry with")
    report = tmp_path / "run" / "report.json"
    report.parent.mkdir()
    plan = tmp_path / "run" / "plan.json"
    plan.write_text(json.dumps({"kind": "join", "report_uri": report.as_uri()}))
    done = subprocess.run([old, str(ENTRY), "--plan", plan.as_uri(), "--kind", "join"], capture_output=True,
                          text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("FAILED: Python 3.") and "need 3.10 or newer" in line
    # where the operator reads the job's reason (operators/base.py: <report_uri>.error)
    assert (tmp_path / "run" / "report.json.error").read_text().strip() == line.removeprefix("FAILED: ")


def test_an_explicit_jar_of_another_line_is_passed_over(monkeypatch):
    """``$COLOCATE_LOCALITY_JAR`` wins for the line it was built for (its manifest says which), and
    is passed over for another: a 3.5 jar is never shipped to a 4.3 cluster."""
    from airflow_colocate.spark import locality

    jar35 = find_jar("3.5").path
    monkeypatch.setenv(locality.JAR_ENV, str(jar35))
    assert locality.jar_line(jar35) == "3.5"
    assert find_jar("3.5") == (jar35, "env")
    other = find_jar("4.3")
    assert other is not None and other.origin != "env" and other.path.name == jar_name("4.3")
    assert locality.locality_conf(line="3.5").get("spark.sql.extensions") is None  # 3.5's jar has no extension
    assert locality.EXTENSIONS_CLASS in locality.locality_conf(line="4.3")["spark.sql.extensions"]
