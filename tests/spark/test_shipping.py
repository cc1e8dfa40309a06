"""The package's zip for --py-files (spark/shipping.py): what is in it, that it imports from the zip
alone, that it is built once and rebuilt when a checkout changes, and that builders racing each
other leave one whole zip. No Spark here: tests/spark/test_cluster_without_package.py ships it to a
cluster that lacks the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from airflow_colocate.spark import shipping


def test_the_zip_holds_the_package_and_nothing_else(tmp_path):
    z = shipping.package_zip(tmp_path)
    names = zipfile.ZipFile(z).namelist()
    root = shipping.package_root()
    assert z.parent == tmp_path and z.name.startswith("airflow_colocate-0.")
    assert {n.removeprefix("airflow_colocate/") for n in names if not n.endswith("/")} == \
        {rel for rel, _ in shipping.package_files(root)}
    assert "airflow_colocate/spark/clone_job.py" in names and "airflow_colocate/catalog/migrations/env.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".jar")) or not n.startswith(
        "airflow_colocate/")]
    assert "airflow_colocate/planner/" in names  # a namespace package is found by its directory entry


def test_the_package_imports_from_the_zip_alone(tmp_path):
    """No site-packages (-S), no editable finder: only the zip on the path."""
    z = shipping.package_zip(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import airflow_colocate.core.contract, "
            "airflow_colocate.planner.join as j, airflow_colocate.spark.shipping as s; "
            "print(j.__file__); print(s.package_root(), s.package_zip())")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(z)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    where, shipped = done.stdout.splitlines()
    assert where == f"{z}/airflow_colocate/planner/join.py"
    assert shipped == "None None"  # code running from the zip ships nothing: it was shipped


def test_built_once_and_again_when_the_checkout_changes(tmp_path):
    checkout = tmp_path / "src" / "airflow_colocate"
    shutil.copytree(shipping.package_root(), checkout, ignore=shutil.ignore_patterns("__pycache__", "*.jar"))
    first = shipping.package_zip(tmp_path / "cache", root=checkout)
    data = first.read_bytes()
    assert shipping.package_zip(tmp_path / "cache", root=checkout) == first and first.read_bytes() == data
    (checkout / "__pycache__").mkdir()
    (checkout / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")  # not shipped: same zip
    assert shipping.package_zip(tmp_path / "cache", root=checkout) == first
    (checkout / "core" / "naming.py").write_text((checkout / "core" / "naming.py").read_text() + "\n# edited\n")
    second = shipping.package_zip(tmp_path / "cache", root=checkout)
    assert second != first and second.name.split("+")[0] == first.name.split("+")[0]
    assert b"# edited" in zipfile.ZipFile(second).read("airflow_colocate/core/naming.py")
    # the same files give the same bytes, wherever and whenever they are zipped
    other = shipping.package_zip(tmp_path / "cache2", root=checkout)
    assert other.name == second.name and other.read_bytes() == second.read_bytes()


def test_an_installed_package_is_named_by_its_version_only(tmp_path):
    site = tmp_path / "site-packages" / "airflow_colocate"
    shutil.copytree(shipping.package_root(), site, ignore=shutil.ignore_patterns("__pycache__", "*.jar"))
    z = shipping.package_zip(tmp_path / "cache", root=site)
    assert z.name == f"airflow_colocate-{shipping._version()}.zip" and "+" not in z.name


def _build(cache: str) -> str:
    return str(shipping.package_zip(Path(cache)))


def test_builders_racing_each_other_leave_one_whole_zip(tmp_path):
    cache = tmp_path / "cache"
    with ProcessPoolExecutor(4) as pool:
        paths = set(pool.map(_build, [str(cache)] * 8))
    (path,) = paths
    assert zipfile.ZipFile(path).testzip() is None
    assert sorted(p.name for p in cache.iterdir()) == [Path(path).name]  # no temporary file left behind


def test_py_files_keep_the_users_and_add_the_package_once(tmp_path, monkeypatch):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path))
    ours = str(shipping.package_zip())
    assert shipping.with_package(None) == ours
    assert shipping.with_package("/u/a.zip, /u/b.py") == f"/u/a.zip,/u/b.py,{ours}"
    assert shipping.with_package(f"/u/a.zip,{ours}") == f"/u/a.zip,{ours}"
