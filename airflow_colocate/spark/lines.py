"""The Spark line of the cluster a job goes to, known and never guessed (issue 42).

A job submitted with ``spark-submit`` runs on the Spark of that binary, which need not be the
pyspark this side imports: its line is the Spark connection's ``spark_version`` extra when given,
else what that binary's installation says (a pyspark's ``version.py``, a distribution's
``RELEASE``) or, failing that, what ``<binary> --version`` prints (once per binary: cached by path,
size and time in ``$COLOCATE_HOME/cache/spark-versions.json``), else the job is refused in one line saying how to
set it. A session already running (``register``, ``join_in_session``, Spark Connect) knows its own:
``spark.version`` (:func:`airflow_colocate.spark.locality.session_line`).

Standard library only: the operators and ``colocate doctor`` import it without starting Spark.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.paths import colocate_home
from airflow_colocate.core.spark_lines import SparkLine, UnsupportedLine, spark_line

VERSION_EXTRA = "spark_version"  # the Spark connection's extra that names the cluster's Spark
_VERSION_RE = re.compile(r"version\s+(\d+\.\d+\.\d+\S*)")


def find_binary(name: str | None, path: str | None = None) -> str | None:
    """The real path of spark-submit ``name`` (default ``spark-submit``) on ``path`` (default $PATH)."""
    found = shutil.which(name or "spark-submit", path=path if path is not None else os.environ.get("PATH", ""))
    return os.path.realpath(found) if found else None


_RELEASE_RE = re.compile(r"^Spark (\d+\.\d+\.\d+\S*)")
_PYSPARK_RE = re.compile(r"""^__version__(?:: str)? = ["']([^"']+)["']""", re.M)


def installed_version(binary: str) -> str | None:
    """The version of the Spark installation ``binary`` (real path) belongs to, read from its files
    without starting a JVM: a pip-installed pyspark's ``<pyspark>/version.py``, a Spark
    distribution's ``RELEASE``; None when it is neither."""
    home = os.path.dirname(os.path.dirname(binary))
    try:
        with open(os.path.join(home, "version.py")) as f:
            found = _PYSPARK_RE.search(f.read())
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        with open(os.path.join(home, "RELEASE")) as f:
            found = _RELEASE_RE.match(f.readline())
        return found.group(1) if found else None
    except OSError:
        return None


def binary_version(binary: str) -> str | None:
    """The Spark version of spark-submit ``binary``: its installation's own files when they say
    (:func:`installed_version`), else ``binary --version``, cached per binary (path, size and time):
    one JVM start per spark-submit, not one per task."""
    known_here = installed_version(binary)
    if known_here:
        return known_here
    st = os.stat(binary)
    key = f"{binary}|{st.st_size}|{int(st.st_mtime)}"
    cache = colocate_home() / "cache" / "spark-versions.json"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION_RE.search(done.stderr + done.stdout)
    if not found:
        return None
    known[key] = found.group(1)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
    tmp.write_text(json.dumps(known, indent=1))
    os.replace(tmp, cache)
    return known[key]


def submit_line(given: str | None, binary_name: str | None, path: str | None, what: str) -> SparkLine:
    """The line of ``given`` (a connection's ``spark_version``), else of the spark-submit
    ``binary_name`` found on ``path``; :class:`ColocateError` in one line when neither says, or the
    line has no jar. ``what`` names the source for the message (``connection 'spark_default'``)."""
    if given is not None:
        where = f"{what} extra {VERSION_EXTRA}={given!r}"
    else:
        binary = find_binary(binary_name, path)
        given = binary_version(binary) if binary else None
        where = f"{binary} --version"
        if given is None:
            raise ColocateError(f"the Spark version of the cluster behind {what} is unknown "
                                f"({'no ' + (binary_name or 'spark-submit') + ' on PATH' if binary is None else where + ' printed none'}): "
                                f'set its extra {{"{VERSION_EXTRA}": "3.5.6"}} (the cluster\'s Spark version)')
    try:
        return spark_line(given)
    except UnsupportedLine as exc:
        raise ColocateError(f"{exc} (from {where})") from None
