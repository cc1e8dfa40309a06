"""The package's build backend: setuptools, plus the locality jar compiled into every wheel.

Why a backend of its own: the jar (``java/colocate-locality``) is what makes local reads and the
ordered bucket read work, and a wheel without it installs and runs with both silently off. So a
wheel build compiles the Java sources with ``javac --release 17`` once per supported Spark line,
against that line's own jars (``locality_jar.py``), and stores the results as package data at
``airflow_colocate/jars/colocate-locality-spark<line>_<scala>.jar``, where
``airflow_colocate.spark.locality.find_jar`` picks the cluster's line's.

PySpark (~450 MB of jars) is a build requirement of the *wheel* only, so ``uv build`` installs it
into the isolated build environment (from uv's cache, offline, once cached) while the sdist and
editable installs stay light: an editable install (``scripts/setup.sh``) builds the dev jar itself.
``COLOCATE_SPARK_JARS=/path/to/spark/jars`` compiles against another Spark's jars instead (then no
PySpark is installed for the build); ``--no-build-isolation`` uses the PySpark of the current
environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every other hook is setuptools' own
from setuptools.command.build_py import build_py as _build_py

from locality_jar import JARS_IN_PACKAGE, JAVA_SOURCES, ROOT, build_all, pyspark_requirement


# COLOCATE_BUILD_JAR=0: a wheel without the jar, for an image that builds and ships the jar itself
# (docker/Dockerfile's locality stage, through $COLOCATE_LOCALITY_JAR). Said loudly: such a wheel
# alone runs with local reads and the ordered read off.
SKIP_ENV = "COLOCATE_BUILD_JAR"


def _skipped() -> bool:
    return os.environ.get(SKIP_ENV, "1").strip().lower() in ("0", "false", "no")


def get_requires_for_build_wheel(config_settings=None):
    # the pinned pyspark gives its own line's jars (4.2); every other line comes from its cached
    # virtualenv (locality_jar.spark_jars)
    extra = [] if _skipped() else [pyspark_requirement()]
    return _setuptools.get_requires_for_build_wheel(config_settings) + extra


class BuildPy(_build_py):
    """``build_py`` that also puts the compiled jar next to the package's Python files. An editable
    install skips it: there the jar is ``scripts/setup.sh``'s, built into the source tree."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        if _skipped():
            self.warn(f"{SKIP_ENV}=0: this wheel has no locality jar; set $COLOCATE_LOCALITY_JAR where it runs")
            return
        for target in build_all(ROOT / JAVA_SOURCES, Path(self.build_lib) / JARS_IN_PACKAGE):
            self.announce(f"built the locality jar {target}", level=2)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False) or _skipped():
            return outputs
        from airflow_colocate.core.spark_lines import LINES, jar_name

        return [*outputs, *(str(Path(self.build_lib) / JARS_IN_PACKAGE / jar_name(line)) for line in LINES)]
