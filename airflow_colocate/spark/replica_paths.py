"""Failover for a registered table read by the user's own ``spark.sql`` (issue 46).

The join job and ``jobs.read.query`` run the query themselves, so a replica that fails while read
is caught on the driver and the query runs again over another replica (spark.failover). After
``register()`` the query is the user's: nothing of ours runs between Spark's error and the user.
What Spark does by itself is run a failed task again (``spark.task.maxFailures``, 4 on a cluster;
a ``local[N]`` master allows none, ``local[N,F]`` allows F-1 retries). So with the jar on the
cluster a bucket directory is registered as ``colocatereplica:///<token>``, a path that names the
bucket's good replicas in preference order, and the jar's file system
(``java/.../colocate/locality/ReplicaFileSystem.java``) reads from one of them: the first that
holds the file in a task's first attempt, and in a retried task the first whose bytes match the
catalog's checksum. Spark never hands out a failed task's rows, so no row is read twice.

A replica the file system passes over is reported as one line in its backend's
``_colocate/read-failures`` folder (storage.layout), which the control plane reads the next time it
plans a read (``jobs.read.collect_read_failures``) and marks bad. Without the jar (or its
setting) the registration is as before: the plain replica directories, and a bad page fails the
query, naming the file.
"""

from __future__ import annotations

import base64
import re
import zlib
from urllib.parse import urlsplit
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from airflow_colocate.core.contract import BadReplica, ReadReplica, ReadTable
from airflow_colocate.spark.connect import is_connect, master, say_once
from airflow_colocate.storage import fs

SCHEME = "colocatereplica"
FS_CLASS = "colocate.locality.ReplicaFileSystem"
IMPL_KEY = f"spark.hadoop.fs.{SCHEME}.impl"
MAGIC = "colocate-replicas 1"
# The backing table's LOCATION when its buckets are replica sets: Spark's in-memory catalog checks
# each partition's directory with the file system of the table's, so the table is under this scheme too.
EMPTY_LOCATION = f"{SCHEME}:///_empty"
REPORT_SUFFIX = ".tsv"


def conf() -> dict[str, str]:
    """The settings a session (or a Spark Connect server) starts with so a registered table's
    tasks read through the replica file system (with the jar on its classpath: spark.locality)."""
    return {IMPL_KEY: FS_CLASS, f"{IMPL_KEY}.disable.cache": "true"}


def _enabled(spark) -> bool:
    """Whether this session was started with the replica file system's setting (and, on a classic
    session, its class loads); on Spark Connect the server's setting is trusted."""
    if (spark.conf.get(IMPL_KEY, None) or "").strip() != FS_CLASS:
        return False
    if is_connect(spark):
        return True
    from py4j.protocol import Py4JError

    try:
        return bool(spark._jvm.org.apache.spark.util.Utils.classIsLoadable(FS_CLASS))
    except Py4JError:
        return False


def task_attempts(master_url: str, max_failures: str | None) -> int:
    """How many times Spark runs a failing task: a ``local`` / ``local[N]`` master once whatever
    ``spark.task.maxFailures`` says, ``local[N,F]`` F times, any other ``spark.task.maxFailures``
    (default 4)."""
    m = re.fullmatch(r"local(?:\[\s*[^,\]]*\s*(?:,\s*(\d+)\s*)?\])?", master_url.strip())
    if m is not None:
        return int(m[1]) if m[1] else 1
    return int(max_failures or 4)


def usable(spark) -> bool:
    """Whether a registration may name replica sets: the jar's file system is set up and a failed
    task runs again (else a retry never comes, and the plain replica directories are registered
    as before, with one log line saying why)."""
    if not _enabled(spark):
        return False
    url = master(spark)
    if task_attempts(url, spark.conf.get("spark.task.maxFailures", None)) < 2:
        say_once(f"master {url} runs a failed task once: a registered table's bad replica fails the query instead of "
                 f"being read around; start the session with local[N,F] (F >= 2) or spark.task.maxFailures >= 2")
        return False
    return True


def _clean(value: object) -> str:
    return str(value).replace("\t", " ").replace("\n", " ")


def token_path(where: Sequence[object], replicas: Sequence[ReadReplica], report_dirs: Mapping[int, str],
               locate: Callable[[str], str]) -> str:
    """``colocatereplica:///<token>`` for one bucket directory: ``where`` is (table, partition,
    bucket) for messages and reports, ``replicas`` the candidates in the order they are read; the
    first's recorded files go with it, so the listing at query time is checked again (a file gone
    since the registration would otherwise read as fewer rows)."""
    files = next((r.files for r in replicas if r.files is not None), None) or []
    lines = [MAGIC, "\t".join(_clean(w) for w in where), "\t".join(_clean(x) for f in files for x in f)]
    for r in replicas:
        lines.append("\t".join(_clean(x) for x in (r.replica_id, r.backend_id, r.checksum, locate(r.path),
                                                   report_dirs.get(r.backend_id, ""), r.path)))
    packed = zlib.compress("\n".join(lines).encode("utf-8"), 9)  # it shows in Spark's messages: keep it short
    token = base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")
    return f"{SCHEME}:///{token}"


_TOKEN = re.compile(SCHEME + r":/+([A-Za-z0-9_-]{16,})")


def first_replicas(text: str) -> list[int]:
    """The replica id each replica-set path in ``text`` (an error's message) reads first, in the
    order they appear: a task reads a set's first replica unless that one lacks the file, so that is
    the replica a read failure of a task that ran once names."""
    out = []
    for m in _TOKEN.finditer(text):
        token = m.group(1)
        try:
            lines = zlib.decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))).decode("utf-8").split("\n")
        except (ValueError, zlib.error, UnicodeDecodeError):
            continue
        if len(lines) > 3 and lines[0] == MAGIC and lines[3].split("\t", 1)[0].isdigit():
            out.append(int(lines[3].split("\t", 1)[0]))
    return out


def with_replica_sets(chosen: list[ReadTable], planned: list[ReadTable], bad: Sequence[BadReplica],
                      report_dirs: Mapping[int, str], locate: Callable[[str], str] = lambda p: p) -> list[ReadTable]:
    """``chosen`` (the tables as the listing check registered them) with each bucket registered as
    its replica set: the checked replica first, then the others of ``planned`` the check did not find
    bad. Every bucket, even one with a single replica (a set of one: its read still fails naming the
    bucket), since a table's partitions must all be under this scheme (:data:`EMPTY_LOCATION`)."""
    excluded = {b.replica_id for b in bad}
    out = []
    for table, plan in zip(chosen, planned):
        parts = []
        for part, planned_part in zip(table.partitions, plan.partitions):
            paths = list(part.bucket_paths)
            for b, path in enumerate(paths):
                if not path:
                    continue
                candidates = planned_part.candidates[b] if planned_part.candidates else []
                first = [r for r in candidates if r.path == path] or [ReadReplica(0, 0, path, 0)]
                rest = [r for r in candidates if r.replica_id not in excluded and r.path != path]
                paths[b] = token_path((table.table or table.name, part.value, b), [*first, *rest], report_dirs, locate)
            parts.append(replace(part, bucket_paths=paths))
        out.append(replace(table, partitions=parts))
    return out


def for_user_queries(spark, chosen: list[ReadTable], planned: list[ReadTable], bad: Sequence[BadReplica],
                     report_dirs: Mapping[int, str] | None, location: str,
                     locate: Callable[[str], str]) -> tuple[list[ReadTable], str]:
    """The tables and backing-table LOCATION a registration for the user's own queries uses: the
    replica sets (:func:`with_replica_sets`) where the session is :func:`usable`, else as they were
    (``report_dirs`` None: the caller runs the query itself, with its own failover). A table whose
    replicas are in several remote file systems (backends in several S3 buckets or HDFS
    namespaces) gets replica sets wherever the jar's file system is set up, retries or not: a Spark
    table's partitions must all be on its LOCATION's file system, and this scheme spans them."""
    if report_dirs is not None and usable(spark):
        return with_replica_sets(chosen, planned, bad, report_dirs, locate), EMPTY_LOCATION
    if any(len(remote_stores(t)) > 1 for t in chosen) and _enabled(spark):
        return with_replica_sets(chosen, planned, bad, report_dirs or {}, locate), EMPTY_LOCATION
    return chosen, location


def remote_stores(table: ReadTable) -> set[tuple[str, str]]:
    """(scheme, bucket or name node) of every remote file system a table's registered buckets are in."""
    paths = [p for part in table.partitions for p in part.bucket_paths if p]
    return {urlsplit(p)[:2] for p in paths if not fs.is_local(p)}


def parse_report(text: str) -> list[BadReplica]:
    """The replicas one report file names (lines the file system wrote; a torn line is skipped)."""
    out = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 7 or not (fields[0].isdigit() and fields[1].isdigit() and fields[4].isdigit()):
            continue
        rid, backend, table, partition, bucket, path, reason = fields
        out.append(BadReplica(replica_id=int(rid), table=table, partition=partition, bucket_seq=int(bucket),
                              backend_id=int(backend), path=path, reason=reason))
    return out


__all__ = ["EMPTY_LOCATION", "FS_CLASS", "IMPL_KEY", "SCHEME", "conf", "first_replicas", "for_user_queries", "parse_report", "remote_stores",
           "task_attempts", "token_path", "usable", "with_replica_sets"]
