"""pyspark and pyspark-client must be one release, and match the JVM side of Spark.

apache-airflow-providers-apache-spark depends on pyspark-client, whose Python files are installed
over pyspark's own. pyproject.toml pins both to one version so that the overwrite is harmless;
these tests prove it on the installed environment.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
from importlib.metadata import distribution, version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pyspark", "pyspark-client")


def _pins(text: str) -> dict[str, str]:
    """``name==version`` pins for PACKAGES found in requirement lines (lock file or pyproject)."""
    pins: dict[str, str] = {}
    for name in PACKAGES:
        match = re.search(rf"^\s*\"?{re.escape(name)}==([^\s\";#]+)", text, re.MULTILINE)
        if match:
            pins[name] = match.group(1)
    return pins


def test_pyspark_and_pyspark_client_are_one_release() -> None:
    installed = {name: version(name) for name in PACKAGES}
    assert installed["pyspark"] == installed["pyspark-client"], installed

    locked = _pins((ROOT / "requirements.lock").read_text())
    assert locked == installed, f"requirements.lock pins {locked}, installed {installed}"

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = _pins("\n".join(dependencies))
    assert declared == installed, f"pyproject.toml pins {declared}, installed {installed}"


def test_pyspark_client_overwrites_pyspark_byte_for_byte() -> None:
    """Every file both wheels install is identical in both RECORDs and on disk."""
    full = {str(f): f for f in distribution("pyspark").files or ()}
    client = {str(f): f for f in distribution("pyspark-client").files or ()}
    shared = sorted(p for p in full.keys() & client.keys() if full[p].hash and client[p].hash)
    assert len(shared) > 100, "expected pyspark-client to ship (most of) pyspark's Python files"

    differ = [p for p in shared if full[p].hash.value != client[p].hash.value]
    assert not differ, f"pyspark and pyspark-client disagree on {len(differ)} files: {differ[:10]}"

    on_disk_differs = []
    for path in shared:
        digest = hashlib.new(full[path].hash.mode, full[path].read_binary()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != full[path].hash.value:
            on_disk_differs.append(path)
    assert not on_disk_differs, f"installed files differ from the wheels: {on_disk_differs[:10]}"


@pytest.mark.spark
def test_python_side_matches_jvm_side(spark) -> None:
    """The Python files (from pyspark or pyspark-client) and the jars the JVM runs are one release."""
    import pyspark

    assert pyspark.__version__ == spark.version
    assert pyspark.__version__.startswith("4."), pyspark.__version__
    assert spark.range(3).count() == 3
