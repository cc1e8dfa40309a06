"""Each supported Spark line's own pyspark, in a virtualenv of its own, built once and cached.

Used twice: the build compiles each line's locality jar against that line's jars
(``build_support/locality_jar.py``), and the test matrix starts each line's standalone cluster
from it (``tests/sparkcluster.py``). One virtualenv per line, at
``$COLOCATE_SPARK_LINES`` (default ``~/.cache/airflow-colocate/spark-lines``) ``/<version>``, holding
``pyspark==<the line's patch>`` and, for clusters, pyarrow and pandas: what a worker needs.

Why pyspark from PyPI and not a Maven build with Spark ``provided``: pyspark's jars folder *is* the
release's artifacts (``spark-sql_2.12-3.5.9.jar`` …, the same bytes Maven Central serves), one
``uv pip install`` per line fetches the whole compile classpath with no dependency resolution to
pin, and the test matrix needs exactly these installations anyway to start each line's cluster.
Standard library and ``uv`` only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from airflow_colocate.core.spark_lines import LINES  # noqa: E402  (the build runs from the source tree)

CACHE_ENV = "COLOCATE_SPARK_LINES"
READY = ".ready"


def cache_root() -> Path:
    given = os.environ.get(CACHE_ENV)
    return Path(given) if given else Path.home() / ".cache" / "airflow-colocate" / "spark-lines"


def line_venv(line: str, extras: tuple[str, ...] = (), python: str | None = None) -> Path:
    """The virtualenv of ``line``'s pyspark (and ``extras``, exact pins), created on first use;
    returns its folder. Raises RuntimeError naming what failed (uv missing, an install that failed)."""
    version = LINES[line].patch
    dest = cache_root() / version
    stamp = dest / READY
    want = "\n".join(sorted((f"pyspark=={version}", *extras)))
    have = set(stamp.read_text().split("\n")) if stamp.is_file() else set()
    if set(want.split("\n")) <= have and (dest / "bin" / "python").exists():
        return dest  # what the build needs (pyspark) is part of what the tests need (and pyarrow, pandas)
    uv = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if not Path(uv).exists():
        raise RuntimeError(f"uv not found: it builds Spark {line}'s virtualenv ({dest}); install uv and run again")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    steps = [] if (dest / "bin" / "python").exists() else [[uv, "venv", "-q", "--python", base, str(dest)]]
    steps.append([uv, "pip", "install", "-q", "--python", str(dest / "bin" / "python"), *want.split("\n")])
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} for Spark {line} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    stamp.write_text("\n".join(sorted(have | set(want.split("\n")))))
    return dest


def pyspark_home(venv: Path) -> Path:
    """The pyspark folder of a line's virtualenv (its ``jars/`` and ``bin/``)."""
    found = sorted(venv.glob("lib/python3*/site-packages/pyspark"))
    if not found:
        raise RuntimeError(f"no pyspark in {venv}")
    return found[0]


# What a test cluster's worker needs beside pyspark (the jobs ship the package and the jar)
WORKER_PACKAGES = ("pyarrow", "pandas")


def worker_pins(lock: Path = ROOT / "requirements.lock") -> tuple[str, ...]:
    """``name==version`` of :data:`WORKER_PACKAGES` as ``requirements.lock`` pins them: the workers
    run what the Airflow side was tested with."""
    pins = {}
    for line in lock.read_text().splitlines():
        name, sep, version = line.split(";")[0].split("#")[0].strip().partition("==")
        if sep:
            pins[name.strip().lower()] = f"{name.strip()}=={version.strip()}"
    missing = [n for n in WORKER_PACKAGES if n not in pins]
    if missing:
        raise RuntimeError(f"{lock} pins no {', '.join(missing)}")
    return tuple(pins[n] for n in WORKER_PACKAGES)


if __name__ == "__main__":
    # `spark_lines_env.py [LINE ...]`: each line's virtualenv, pyspark only (the jars' build);
    # `--workers`: with the workers' packages too, as the line matrix starts its clusters from them
    # (scripts/setup.sh --with-spark-lines, which `make test` passes)
    args = sys.argv[1:]
    extras = worker_pins() if "--workers" in args else ()
    for name in [a for a in args if a != "--workers"] or LINES:
        print(line_venv(name, extras))
