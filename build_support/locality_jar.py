"""Compile the locality jar (``java/colocate-locality``) with javac against a Spark's jars.

The one recipe for the jar, standard library only: the wheel build runs it
(``colocate_build.BuildPy``) and so does ``scripts/setup.sh`` for an editable checkout
(``python build_support/locality_jar.py`` writes ``airflow_colocate/jars/colocate-locality.jar``,
the place the installed package keeps it, so both find it the same way).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JAVA_SOURCES = Path("java/colocate-locality/src/main/java")
JAR_IN_PACKAGE = Path("airflow_colocate/jars/colocate-locality.jar")
SPARK_JARS_ENV = "COLOCATE_SPARK_JARS"
JDK_HINT = ("install a JDK 17 (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) "
            "or set JAVA_HOME to one, then build again")
# A fixed timestamp for every jar entry, so the same sources give the same jar bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def pyspark_requirement() -> str:
    """The ``pyspark==X`` of ``[project] dependencies``: the jar is compiled against the Spark it runs on."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d.split(";")[0].strip() for d in deps if d.replace(" ", "").startswith("pyspark==")]
    if len(pins) != 1:
        raise RuntimeError(f"pyproject.toml: expected one 'pyspark==' dependency to build the locality jar against, found {pins}")
    return pins[0]


class JarBuildError(RuntimeError):
    """The wheel cannot be built with its jar; the message says what to install or set."""


def javac() -> Path:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "javac" if home and (Path(home) / "bin" / "javac").is_file() else None
    found = found or (Path(p) if (p := shutil.which("javac")) else None)
    if found is None:
        raise JarBuildError(f"building airflow-colocate's wheel needs javac (for its locality jar), "
                            f"and none was found on PATH{' or in JAVA_HOME' if home else ''}: {JDK_HINT}")
    return found


def spark_jars() -> Path:
    given = os.environ.get(SPARK_JARS_ENV)
    if given:
        jars = Path(given)
        where = f"{SPARK_JARS_ENV}={given}"
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise JarBuildError(f"building the locality jar needs {pyspark_requirement()} in the build environment "
                                f"(a build requirement of the wheel; with --no-build-isolation install it first), "
                                f"or {SPARK_JARS_ENV}=<a Spark's jars folder>")
        jars = Path(spec.origin).parent / "jars"
        where = f"pyspark at {jars.parent}"
    if not any(jars.glob("spark-sql_*.jar")):
        raise JarBuildError(f"no spark-sql jar in {jars} ({where}): point {SPARK_JARS_ENV} at a Spark's jars folder")
    return jars


def build_jar(sources: Path, target: Path) -> Path:
    """Compile ``sources`` into the jar ``target`` (written whole or not at all)."""
    files = sorted(str(p) for p in sources.rglob("*.java"))
    if not files:
        raise JarBuildError(f"no Java sources under {sources}: the sdist must include java/colocate-locality/src")
    compiler, classpath = javac(), spark_jars()
    with tempfile.TemporaryDirectory(prefix="colocate-jar-") as tmp:
        classes = Path(tmp)
        done = subprocess.run([str(compiler), "--release", "17", "-nowarn", "-d", str(classes),
                               "-cp", str(classpath / "*"), *files], capture_output=True, text=True)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()
            hint = f" ({JDK_HINT})" if "release" in detail and "17" in detail else ""
            raise JarBuildError(f"javac failed compiling the locality jar{hint}:\n{detail}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            manifest = zipfile.ZipInfo("META-INF/MANIFEST.MF", _EPOCH)
            jar.writestr(manifest, "Manifest-Version: 1.0\r\nCreated-By: airflow-colocate build\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.writestr(zipfile.ZipInfo(path.relative_to(classes).as_posix(), _EPOCH), path.read_bytes(),
                             zipfile.ZIP_DEFLATED)
        partial.replace(target)
    return target


if __name__ == "__main__":  # scripts/setup.sh: the dev jar of an editable checkout, at the same place
    try:
        print(build_jar(ROOT / JAVA_SOURCES, ROOT / JAR_IN_PACKAGE))
    except JarBuildError as exc:
        print(f"locality_jar: error: {exc}", file=sys.stderr)
        sys.exit(1)
