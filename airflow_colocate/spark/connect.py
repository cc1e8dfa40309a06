"""Spark Connect (``sc://…``) or a classic session: the one place that tells them apart.

A Connect client has no JVM: no ``_jvm``, ``_jdf``, ``_jsparkSession`` or ``sparkContext``. What
the read path needs from Spark it then asks through public calls that travel to the server
(``spark.sql``, ``spark.conf``, a DataFrame's explain text, a ``binaryFile`` listing run on the
cluster). Classic sessions keep the faster JVM paths.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

log = logging.getLogger("airflow_colocate.spark.connect")
_said: set[str] = set()


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session. By its class, not
    ``pyspark.sql.utils.is_remote()``: one process may hold a classic session and a Connect one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def say_once(message: str) -> None:
    """Log a Connect limitation once per process (a notebook runs many reads)."""
    if message not in _said:
        _said.add(message)
        log.info(message)


def master(spark) -> str:
    """The session's master URL (the server's, on Connect)."""
    if is_connect(spark):
        return spark.conf.get("spark.master", "") or ""
    return spark.sparkContext.master or ""


def physical_plan_text(df) -> str:
    """``df``'s physical plan as Spark prints it. Classic: the executed plan (after a run, AQE's final
    plan). Connect: the server's explain of the plan (before it runs: AQE's initial plan), through
    the client's explain string, or the printed ``df.explain()`` where the client lacks it."""
    if not is_connect(df.sparkSession):
        return str(df._jdf.queryExecution().executedPlan().toString())
    explain = getattr(df, "_explain_string", None)
    if explain is not None:
        text = explain(mode="simple")
    else:  # pragma: no cover - a client without the private helper
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            df.explain(mode="simple")
        text = out.getvalue()
    return text.split("== Physical Plan ==", 1)[-1].strip("\n")


def scoped_connect(spark, conf: dict, job_group: tuple[str, str] | None):
    """:func:`airflow_colocate.spark.session.scoped` on Spark Connect (a generator it delegates to):
    the same settings, set and restored; the job group, which Connect does not have, as an
    operation tag of this client thread, removed afterwards with any other the block added."""
    saved = {key: spark.conf.get(key, None) for key in conf}
    tags = set(spark.getTags())
    try:
        _set(spark, conf)
        if job_group is not None:
            spark.addTag(job_group[0])
        yield
    finally:
        _set(spark, saved)
        for tag in set(spark.getTags()) - tags:
            spark.removeTag(tag)


def _set(spark, conf: dict) -> None:
    for key, value in conf.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def _listing_key(path: str) -> str:
    """A directory or file URI as Spark spells it back (``file:/x``, ``file:///x`` and ``/x`` alike)."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return "file:" + os.path.normpath(parts.path or "/")
    return path.rstrip("/")


_PATH_NOT_FOUND = re.compile(r"Path does not exist: (\S+?)\.?(?:\s|$)")


def list_on_cluster(spark, paths: Sequence[str]) -> dict[str, tuple[list[tuple[str, int]] | None, list[str]]]:
    """Each directory's (file name, size) listing and sub-directories, as the cluster sees them
    (None: the directory is gone). A ``binaryFile`` scan lists the files the way a parquet read will
    (hidden ``.``/``_`` names are skipped by both) and, with only ``path`` and ``length`` selected,
    reads no file's bytes. Why on the cluster: a Spark Connect client need not see the replicas'
    disks at all."""
    out: dict[str, tuple[list[tuple[str, int]] | None, list[str]]] = {}
    todo = {_listing_key(p): p for p in paths}
    while todo:
        try:
            rows = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                    .load(list(todo.values())).select("path", "length").collect())
        except Exception as exc:  # one missing directory fails the whole listing
            m = _PATH_NOT_FOUND.search(str(exc))
            gone = m and todo.pop(_listing_key(m[1]), None)
            if not gone:
                raise
            out[gone] = (None, [])
            continue
        found: dict[str, tuple[list[tuple[str, int]], set[str]]] = {k: ([], set()) for k in todo}
        for row in rows:
            key = _listing_key(row["path"])
            parent = next((d for d in found if key.startswith(d.rstrip("/") + "/")), None)
            if parent is None:
                continue
            rel = key[len(parent.rstrip("/")) + 1:]
            if "/" in rel:
                found[parent][1].add(rel.split("/", 1)[0])
            else:
                found[parent][0].append((rel, int(row["length"])))
        for key, (files, dirs) in found.items():
            out[todo[key]] = (sorted(files), sorted(dirs))
        todo = {}
    return out
