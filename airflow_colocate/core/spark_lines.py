"""The Spark lines the package runs on, what each one supports, and the oldest Python a job runs on.

A *line* is a Spark minor release (``3.5``, ``4.3``): Spark's internal API, and its Scala, change
between lines and not within one. The wheel carries one locality jar per line, compiled against that
line's own Spark (``build_support/locality_jar.py``); a job ships the jar of the cluster's line,
which is learned (a connection's ``spark_version``, ``spark-submit --version``, a session's
``spark.version``), never assumed from the pyspark this side has installed.

Standard library only: the build (``build_support``), the operators and the job code read it.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

LOCALITY = "locality"  # colocatefile://: a bucket's task runs on its replica's host
ORDERED = "ordered read"  # a colocated bucket's key-sorted files read in order, no sort
COLUMNAR = "columnar merge join"  # the merge join over Arrow-like column vectors
ALL_FEATURES = (LOCALITY, ORDERED, COLUMNAR)


class SparkLine(NamedTuple):
    line: str  # "3.5"
    patch: str  # the release the jar is compiled against and the tests run: the line's newest
    scala: str  # "2.12"
    features: tuple[str, ...]
    why_not: str = ""  # why the missing features are missing


_ORDERED_NOT_ON_212 = ("the ordered read and the columnar merge join are written against Spark 4's "
                       "Scala 2.13 plan API (immutable Seq children, withNewChildrenInternal over "
                       "IndexedSeq, collation-aware strings); on 3.5 a colocated join sorts each bucket "
                       "as plain Spark does")

LINES: dict[str, SparkLine] = {
    "3.5": SparkLine("3.5", "3.5.9", "2.12", (LOCALITY,), _ORDERED_NOT_ON_212),
    "4.0": SparkLine("4.0", "4.0.5", "2.13", ALL_FEATURES),
    "4.1": SparkLine("4.1", "4.1.4", "2.13", ALL_FEATURES),
    "4.2": SparkLine("4.2", "4.2.0", "2.13", ALL_FEATURES),
    "4.3": SparkLine("4.3", "4.3.0", "2.13", ALL_FEATURES),
}

# The oldest Python a Spark job of this package runs on (driver and executors). Why 3.10: pyspark
# 4.1 and later need it; of the platforms that run 3.5, Databricks 14.3+ ships 3.10 and Dataproc
# 2.2 ships 3.11; the job code's plan and report classes use ``X | None`` annotations that Python
# evaluates when it reads them, which 3.9 cannot. EMR 7's system python3 is 3.9: point
# PYSPARK_PYTHON at a 3.10+ interpreter there.
MIN_PYTHON = (3, 10)


class UnsupportedLine(ValueError):
    """A Spark version no jar of this package is built for, or none given."""


def line_of(version: str) -> str:
    """``"3.5"`` for ``"3.5.9"`` (or ``"3.5"``, ``"4.3.0-SNAPSHOT"``); raises on a non-version."""
    parts = str(version).strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].split("-")[0].isdigit():
        raise UnsupportedLine(f"{version!r} is not a Spark version (expected e.g. 3.5.6 or 4.3)")
    return f"{int(parts[0])}.{int(parts[1].split('-')[0])}"


def spark_line(version: str) -> SparkLine:
    """The supported line of a Spark ``version``; :class:`UnsupportedLine` in one line otherwise."""
    line = line_of(version)
    if line not in LINES:
        raise UnsupportedLine(f"Spark {version} (line {line}) is not supported: this package has jars and job code "
                              f"for Spark {', '.join(LINES)}; run the job on a cluster of one of those lines")
    return LINES[line]


def jar_name(line: str) -> str:
    """The file name of the locality jar of ``line``: ``colocate-locality-spark3.5_2.12.jar``."""
    return f"colocate-locality-spark{line}_{LINES[line].scala}.jar"


def missing_features(line: str) -> tuple[str, ...]:
    return tuple(f for f in ALL_FEATURES if f not in LINES[line].features)


def python_refusal(version_info=None) -> str | None:
    """One line refusing an interpreter older than :data:`MIN_PYTHON`; None when it is new enough."""
    v = tuple(version_info or sys.version_info)[:3]
    if v[:2] >= MIN_PYTHON:
        return None
    want = ".".join(map(str, MIN_PYTHON))
    return (f"Python {'.'.join(map(str, v))} is too old for airflow-colocate's Spark jobs (they need {want} or newer): "
            f"set PYSPARK_PYTHON (executors) and PYSPARK_DRIVER_PYTHON (driver) to a Python {want}+ on the cluster")
