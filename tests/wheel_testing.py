"""The package as users get it: a wheel built from this checkout and installed into a virtualenv of
its own, outside the checkout (issue 27).

``tests/conftest.py`` builds the wheel once per test session (fixture ``colocate_wheel``) and
installs it once (``wheel_venv``); any test that needs the installed package, e.g. on a cluster
whose workers never saw the checkout, takes those fixtures. Both run offline from uv's cache
(measured here: the build, sdist then wheel, 6 to 18 s on the shared 2-core machine; the install ~2 s): the build installs the
pinned pyspark into its isolated build environment, the install resolves against
``requirements.lock`` as constraints.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from airflow_colocate.core.spark_lines import LINES, jar_name

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"
# one locality jar per Spark line (core/spark_lines.py); the Airflow side's own pyspark is 4.2
JARS_IN_WHEEL = {line: f"airflow_colocate/jars/{jar_name(line)}" for line in LINES}
JAR_IN_WHEEL = JARS_IN_WHEEL["4.2"]
# Variables that would let the installed package see the checkout or another jar or Python.
_LEAKS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "COLOCATE_LOCALITY_JAR", "PYSPARK_PYTHON",
          "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_MASTER", "COLOCATE_CATALOG_URL")


def uv() -> list[str]:
    """uv where scripts/setup.sh looks for it: PATH, ~/.local/bin, then ``python3 -m uv``."""
    path = os.pathsep.join([os.environ.get("PATH", ""), str(Path.home() / ".local" / "bin"), str(Path(sys.executable).parent)])
    found = shutil.which("uv", path=path)
    return [found] if found else ["python3", "-m", "uv"]


def _uv(args: list[str], what: str) -> None:
    """Offline first (uv's cache holds all of it after scripts/setup.sh); if the cache was pruned,
    once more with the index."""
    done = subprocess.run([*uv(), *args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "--offline" in args:
        done = subprocess.run([*uv(), *[a for a in args if a != "--offline"]], capture_output=True, text=True,
                              timeout=600)
    if done.returncode != 0:
        raise AssertionError(f"{what} failed ({done.returncode}):\n{done.stderr[-4000:]}")


def build_wheel(out: Path) -> tuple[Path, Path]:
    """``uv build`` of the checkout: the sdist, then the wheel built from that sdist (so a file the
    sdist forgets fails here). Returns (sdist, wheel)."""
    out.mkdir(parents=True, exist_ok=True)
    _uv(["build", "--offline", "--quiet", "-o", str(out), str(REPO)], "uv build")
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return sdist, wheel


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def colocate(self) -> Path:
        return self.root / "bin" / "colocate"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a user of this venv: no checkout on the path, the venv's bin first."""
        env = {k: v for k, v in os.environ.items() if k not in _LEAKS}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra)
        return env

    def run(self, args: list[str], cwd: Path, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in args], cwd=cwd, env=self.env(**extra), capture_output=True,
                              text=True, timeout=timeout)


def install(wheel: Path, root: Path) -> Venv:
    """A fresh virtualenv at ``root`` (the test's Python) with the wheel and its dependencies,
    pinned by ``requirements.lock``, installed offline."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    _uv(["venv", "--quiet", "--python", str(base), str(root)], "uv venv")
    _uv(["pip", "install", "--quiet", "--offline", "--python", str(root / "bin" / "python"), "-c", str(LOCK),
         str(wheel)], "uv pip install of the wheel")
    return Venv(root)
