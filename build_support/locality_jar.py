"""Compile the locality jars (``java/colocate-locality``), one per Spark line, with javac against
that line's own Spark jars.

The one recipe for the jars, standard library only (and ``uv``): the wheel build runs it
(``colocate_build.BuildPy``) and so does ``scripts/setup.sh`` for an editable checkout
(``python build_support/locality_jar.py`` writes ``airflow_colocate/jars/colocate-locality-spark<line>_<scala>.jar``
for every line of :data:`airflow_colocate.core.spark_lines.LINES`, the place the installed package
keeps them, so both find them the same way).

Each line compiles the sources its Spark has the API for: ``colocate/locality`` (the Hadoop file
system) on every line, ``colocate/ordered`` (the ordered read and the columnar merge join, a Spark
extension) on the lines whose features name them (Spark 4.x, Scala 2.13). A line's jars come from
``$COLOCATE_SPARK_JARS_<line>`` (e.g. ``COLOCATE_SPARK_JARS_3_5``), else from the pyspark of this
environment when it is that line, else from the line's cached virtualenv
(``build_support/spark_lines_env.py``, created with uv on first use).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # airflow_colocate.core.spark_lines: the lines and what each compiles
sys.path.insert(0, str(Path(__file__).resolve().parent))
JAVA_SOURCES = Path("java/colocate-locality/src/main/java")
JARS_IN_PACKAGE = Path("airflow_colocate/jars")
SPARK_JARS_ENV = "COLOCATE_SPARK_JARS"  # + _<line>, e.g. COLOCATE_SPARK_JARS_3_5
# the source folders (under JAVA_SOURCES) a line compiles, by the feature they implement
FEATURE_SOURCES = {"locality": ("colocate/locality",), "ordered read": ("colocate/ordered",),
                   "columnar merge join": ("colocate/ordered",)}
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


def spark_jars(line: str) -> Path:
    """The jars folder of Spark ``line``'s own release (see the module docstring)."""
    import importlib.metadata

    from spark_lines_env import line_venv, pyspark_home

    env = f"{SPARK_JARS_ENV}_{line.replace('.', '_')}"
    given = os.environ.get(env)
    if given:
        jars, where = Path(given), f"{env}={given}"
    else:
        try:
            here = importlib.metadata.version("pyspark")
        except importlib.metadata.PackageNotFoundError:
            here = ""
        spec = importlib.util.find_spec("pyspark")
        if here and here.split(".")[:2] == line.split(".") and spec is not None and spec.origin is not None:
            jars, where = Path(spec.origin).parent / "jars", f"pyspark {here} of this environment"
        else:
            try:
                home = pyspark_home(line_venv(line))
            except RuntimeError as exc:
                raise JarBuildError(f"Spark {line}'s jars: {exc} (or set {env}=<Spark {line}'s jars folder>)") from exc
            jars, where = home / "jars", f"Spark {line}'s virtualenv {home}"
    if not any(jars.glob("spark-sql_*.jar")):
        raise JarBuildError(f"no spark-sql jar in {jars} ({where}): point {env} at Spark {line}'s jars folder")
    return jars


def line_sources(sources: Path, line: str) -> list[str]:
    """The Java files Spark ``line`` compiles: those of the features it supports."""
    from airflow_colocate.core.spark_lines import LINES

    folders = sorted({f for feature in LINES[line].features for f in FEATURE_SOURCES[feature]})
    return sorted(str(p) for folder in folders for p in (sources / folder).rglob("*.java"))


def build_all(sources: Path, target_dir: Path, lines=None) -> list[Path]:
    """One jar per line (all of :data:`LINES` unless ``lines``), in ``target_dir``; jars of lines
    no longer built are removed from it."""
    from airflow_colocate.core.spark_lines import LINES, jar_name

    names = list(lines or LINES)
    built = [build_jar(sources, target_dir / jar_name(line), line) for line in names]
    if lines is None:
        for old in target_dir.glob("colocate-locality*.jar"):
            if old not in built:
                old.unlink()
    return built


def build_jar(sources: Path, target: Path, line: str) -> Path:
    """Compile Spark ``line``'s ``sources`` into the jar ``target`` (written whole or not at all)."""
    files = line_sources(sources, line)
    if not files:
        raise JarBuildError(f"no Java sources under {sources}: the sdist must include java/colocate-locality/src")
    compiler, classpath = javac(), spark_jars(line)
    with tempfile.TemporaryDirectory(prefix="colocate-jar-") as tmp:
        classes = Path(tmp)
        done = subprocess.run([str(compiler), "--release", "17", "-nowarn", "-d", str(classes),
                               "-cp", str(classpath / "*"), *files], capture_output=True, text=True)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()
            hint = f" ({JDK_HINT})" if "release" in detail and "17" in detail else ""
            raise JarBuildError(f"javac failed compiling the locality jar of Spark {line}{hint}:\n{detail}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            manifest = zipfile.ZipInfo("META-INF/MANIFEST.MF", _EPOCH)
            jar.writestr(manifest, f"Manifest-Version: 1.0\r\nCreated-By: airflow-colocate build\r\n"
                                   f"Colocate-Spark-Line: {line}\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.writestr(zipfile.ZipInfo(path.relative_to(classes).as_posix(), _EPOCH), path.read_bytes(),
                             zipfile.ZIP_DEFLATED)
        partial.replace(target)
    return target


if __name__ == "__main__":  # scripts/setup.sh: the dev jars of an editable checkout, at the same place
    try:
        for built in build_all(ROOT / JAVA_SOURCES, ROOT / JARS_IN_PACKAGE, sys.argv[1:] or None):
            print(built)
    except JarBuildError as exc:
        print(f"locality_jar: error: {exc}", file=sys.stderr)
        sys.exit(1)
