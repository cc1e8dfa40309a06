"""The package travels with every Spark job: a zip of ``airflow_colocate`` for ``--py-files``.

The write, clone and import jobs run this package's functions on executors (the staging, the
verified copy, the placing of an imported bucket). A cluster that has Spark, Java and pyarrow but
has never heard of this package fails them with ``ModuleNotFoundError`` unless the job brings the
code along, so every job does: the operators pass the zip as ``--py-files`` (``spark.submit.pyFiles``)
next to the user's own, and a session the CLI or a user started gets it once through
``SparkContext.addPyFile`` (:func:`ship`). The locality jar travels separately as ``--jars``
(:mod:`airflow_colocate.spark.locality`).

The zip is built once per package version and kept in ``$COLOCATE_HOME/cache/py``; a source
checkout (an editable install, or a package outside ``site-packages``) adds a hash of its files to
the name, so an edited checkout ships its edits and never a stale zip. Two tasks building it at
once each write a temporary file and rename it into place: the zip a job ships is always whole.

Standard library only (plus :mod:`airflow_colocate.core.paths`): the operators, the CLI and
``spark/session.py`` import it without starting anything.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import time
import zipfile
from importlib import metadata
from pathlib import Path

from airflow_colocate.core.paths import colocate_home

PACKAGE = "airflow_colocate"
DISTRIBUTION = "airflow-colocate"
ZIP_PREFIX = f"{PACKAGE}-"
PY_FILES_CONF = "spark.submit.pyFiles"
# Never shipped: byte code is per interpreter (executors compile their own), tests are not the
# package, and the locality jar goes through --jars, not a Python path.
_SKIP_DIRS = frozenset({"__pycache__", "tests"})
_SKIP_SUFFIXES = (".pyc", ".pyo", ".jar")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same files always make the same bytes
# A zip no job has asked for in this long is deleted when another is built. Not sooner: a running
# application serves its zip to executors it starts later (dynamic allocation, lost executors).
UNUSED_DAYS = 7

_lock = threading.Lock()


def cache_dir() -> Path:
    """Where the zips are kept: ``$COLOCATE_HOME/cache/py``."""
    return colocate_home() / "cache" / "py"


def package_root() -> Path | None:
    """The package's folder; None when this code was itself imported from a zip, i.e. shipped to
    this process, which is then a driver whose executors got the same zip with it."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "__init__.py").is_file() else None


def package_files(root: Path) -> list[tuple[str, Path]]:
    """``(path inside the package, file)`` of everything shipped, sorted so the zip is reproducible."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in files:
            if name.endswith(_SKIP_SUFFIXES) or name.startswith("."):
                continue
            path = Path(folder, name)
            out.append((path.relative_to(root).as_posix(), path))
    return sorted(out)


def _installed(root: Path) -> bool:
    """Installed from a wheel (its files change only with its version), not a source checkout."""
    return root.parent.name in ("site-packages", "dist-packages")


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def zip_key(root: Path, files: list[tuple[str, Path]]) -> str:
    """The version, and for a source checkout a hash of every shipped file's name and bytes."""
    version = _version()
    if _installed(root) and "unknown" not in version:
        return version
    digest = hashlib.sha256()
    for rel, path in files:
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{version.split('+')[0]}+{digest.hexdigest()[:12]}"


def package_zip(directory: Path | None = None, *, root: Path | None = None) -> Path | None:
    """The zip of this package (or of the package folder ``root``) for ``--py-files``, built on
    first use and cached (see the module docstring); None when the package is itself running from
    a shipped zip."""
    root = Path(root) if root is not None else package_root()
    if root is None:
        return None
    files = package_files(root)
    directory = Path(directory) if directory is not None else cache_dir()
    target = directory / f"{ZIP_PREFIX}{zip_key(root, files)}.zip"
    if target.is_file():
        os.utime(target)  # last used: what the clean-up of old zips goes by
        return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{ZIP_PREFIX}", suffix=".zip.tmp")
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
            # directory entries too: zipimport finds a namespace package (a folder without
            # __init__.py, e.g. planner/) only by its entry
            for folder in sorted({f"{PACKAGE}/"} | {f"{PACKAGE}/{p}/" for rel, _ in files
                                                    for p in _parents(rel)}):
                z.writestr(_info(folder, 0o755 | 0o040000), b"")
            for rel, path in files:
                z.writestr(_info(f"{PACKAGE}/{rel}", 0o644), path.read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # atomic: a concurrent builder renames identical bytes over it
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _drop_unused(directory, keep=target)
    return target


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _info(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_STORED if name.endswith("/") else zipfile.ZIP_DEFLATED
    info.external_attr = mode << 16
    return info


def _drop_unused(directory: Path, keep: Path) -> None:
    cutoff = time.time() - UNUSED_DAYS * 86400
    for old in directory.glob(f"{ZIP_PREFIX}*.zip"):
        try:
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:  # another process dropped it first
            pass


def with_package(py_files: str | None) -> str | None:
    """A ``--py-files`` value: the user's own files, then this package's zip (when it is not
    running from one already)."""
    have = [p.strip() for p in (py_files or "").split(",") if p.strip()]
    ours = package_zip()
    if ours is not None and str(ours) not in have:
        have.append(str(ours))
    return ",".join(have) or None


def ship(spark) -> Path | None:
    """Make this package importable on the executors of ``spark``'s application, once per
    application: ``addPyFile`` of the zip unless the application already has it (spark-submit's
    ``--py-files``, an earlier call). Returns the zip, or None when nothing needs shipping: a
    ``local`` master (its executors are this interpreter's children, which import the package
    already), a Spark Connect session (no SparkContext here), or this code running from the
    shipped zip.

    ``addPyFile`` also puts the zip first on this driver's ``sys.path``; that entry is removed
    again, so the driver keeps importing its own copy of the package (the one it hashed)."""
    try:
        sc = spark.sparkContext
    except Exception:  # a Spark Connect session has none (PySparkNotImplementedError)
        return None
    return ship_context(sc)


def ship_context(sc) -> Path | None:
    """:func:`ship` for a SparkContext: what runs this package's functions on executors calls it
    first, so a job started from a user's own session (``write_in_session``, ``import_in_session``,
    an in-session clone) finds the package on a cluster that never installed it."""
    if sc is None or (sc.master or "").startswith("local"):
        return None
    with _lock:
        ours = package_zip()
        if ours is None:
            return None
        submitted = (sc.getConf().get(PY_FILES_CONF, "") or "").split(",")
        shipped = {os.path.basename(p) for p in submitted if p} | set(getattr(sc, "_python_includes", None) or [])
        if ours.name in shipped:
            return ours
        before = set(sys.path)
        sc.addPyFile(str(ours))
        sys.path[:] = [p for p in sys.path if p in before]
        return ours
