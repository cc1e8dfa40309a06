"""Local reads: each bucket's task runs on the host whose backend stores the replica it reads.

Spark schedules a file scan's partition where its files' blocks are (the hosts a Hadoop file
system reports from ``getFileBlockLocations``). The local file system says "localhost" for every
file, which Spark ignores, so on a multi-host cluster bucket *b* runs on whatever executor is free.
The small Hadoop file system in ``java/colocate-locality`` (scheme ``colocatefile://``, read-only,
otherwise the local file system) reports the host of the backend that holds the file, from the
``colocate.locality.roots`` setting this module sets per job (``host=root`` lines, from the catalog's
backend hosts). A read registers its replica directories under that scheme, and the scheduler runs
the task NODE_LOCAL where an executor on that host is free (after ``spark.locality.wait``, 3 s by
default, it gives up and runs it anywhere: the read still works, over the shared mount).

Without the jar (not built, or not shipped) nothing changes: reads go through ``file://`` with no
locality, and the job log says so once. With a ``local`` master every task is on this host already,
so locality is off. Object stores (``s3a://`` …) are not local to any worker: their roots are left
alone.

:func:`measure` reads back what the scheduler did (tasks NODE_LOCAL / total, bytes read away from
the replica's host) from Spark's status REST API, for the join report and the task log.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from airflow_colocate.core.contract import JoinLocality, ReadTable
from airflow_colocate.core.spark_lines import LINES, ORDERED, jar_name, missing_features, spark_line
from airflow_colocate.spark import replica_paths
from airflow_colocate.spark.connect import is_connect, say_once
from airflow_colocate.spark.connect import master as connect_master
from airflow_colocate.storage import fs

JAR_ENV = "COLOCATE_LOCALITY_JAR"
# One jar per Spark line (core/spark_lines.py): colocate-locality-spark3.5_2.12.jar, ... A job
# ships the jar of the line its cluster runs, which the caller knows (operators: the connection or
# spark-submit --version; a session: spark.version); without a line, the pyspark of this process.
FS_CLASS = "colocate.locality.LocalityFileSystem"
# In the same jar: the rule that reads a colocated bucket's key-sorted files in order instead of
# sorting them again for a sort-merge join (java/.../colocate/ordered/SkipSortedSort.java).
EXTENSIONS_CLASS = "colocate.ordered.ColocateExtensions"
SCHEME = "colocatefile"
ROOTS_KEY = "colocate.locality.roots"
# The task locality of a file scan task Spark ran where its files are. Not PROCESS_LOCAL: Spark
# reports a task with no preferred location (a file:// replica) as PROCESS_LOCAL.
LOCAL_LEVELS = ("NODE_LOCAL",)

_said: set[str] = set()


log = logging.getLogger("airflow_colocate.spark.locality")  # shown as colocate-locality: … (spark.entry)


def _say_once(message: str, level: int = logging.INFO) -> None:
    if message not in _said:
        _said.add(message)
        log.log(level, message)


class JarFound(NamedTuple):
    path: Path
    origin: str  # one of JAR_ORIGINS


def local_line() -> str:
    """The Spark line of the pyspark this process imports (the line of its own local sessions)."""
    from pyspark.version import __version__

    return spark_line(__version__).line


def session_line(spark) -> str | None:
    """The Spark line a session runs (``spark.version``), None when it is not a supported one."""
    try:
        return spark_line(spark.version).line
    except ValueError:
        return None


def jar_has_ordered(path: Path) -> bool:
    """Whether a locality jar carries the ordered read's extension (the Spark 4 lines' jars do)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as jar:
            return EXTENSIONS_CLASS.replace(".", "/") + ".class" in jar.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def jar_line(path: Path) -> str | None:
    """The Spark line a locality jar was built for (its manifest's ``Colocate-Spark-Line``, which
    build_support/locality_jar.py writes); None for a jar that does not say."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as jar:
            manifest = jar.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    for row in manifest.splitlines():
        if row.startswith("Colocate-Spark-Line:"):
            return row.split(":", 1)[1].strip()
    return None


def announce_line(spark) -> None:
    """Say once in the job log which Spark line runs and what of the jar's it runs without."""
    line = session_line(spark)
    if line is None:
        return
    missing = missing_features(line)
    if missing:
        _say_once(f"Spark {spark.version} (line {line}, Scala {LINES[line].scala}): runs without the "
                  f"{' and the '.join(missing)}: {LINES[line].why_not}; results are the same")


# Where the jar is looked for, in this order. An explicit ``$COLOCATE_LOCALITY_JAR`` wins (the Docker
# image sets it; a user testing another build of the jar sets it), as an explicit setting does
# everywhere else; then the jar the wheel carries as package data (built with the package,
# build_support/colocate_build.py; scripts/setup.sh puts the dev jar at the same place in a
# checkout); then where scripts/setup.sh built it before the jar became package data.
JAR_ORIGINS = ("env", "package", "checkout")


def package_jar(line: str) -> Path | None:
    """Where the installed package keeps the jar of ``line`` (it may not be there); None for a
    package that is not on a file system (imported from a zip), which cannot hand a path to Spark."""
    try:
        where = importlib.resources.files("airflow_colocate") / "jars" / jar_name(line)
    except ModuleNotFoundError:
        return None
    return Path(str(where)) if isinstance(where, Path) else None


def find_jar(line: str | None = None) -> JarFound | None:
    """The locality jar of Spark ``line`` (default: :func:`local_line`) and where it was found (see
    :data:`JAR_ORIGINS`); None when nowhere. A ``$COLOCATE_LOCALITY_JAR`` naming no file is passed
    over with one warning (``colocate doctor`` reports it as a problem), so a job still runs with
    the package's jar."""
    line = line or local_line()
    env = os.environ.get(JAR_ENV)
    if env and not Path(env).is_file():
        _say_once(f"${JAR_ENV}={env} is not a file; looking for the locality jar in the package", logging.WARNING)
    if env and Path(env).is_file() and (built_for := jar_line(Path(env))) not in (None, line):
        _say_once(f"${JAR_ENV}={env} was built for Spark {built_for}, the job runs Spark {line}: "
                  f"looking for Spark {line}'s jar in the package", logging.WARNING)
        env = None
    candidates = [(Path(env), "env")] if env else []
    if (packaged := package_jar(line)) is not None:
        candidates.append((packaged, "package"))
    candidates.append((Path(__file__).resolve().parents[2] / "java" / "colocate-locality" / "build" / jar_name(line),
                       "checkout"))
    return next((JarFound(p, origin) for p, origin in candidates if p.is_file()), None)


def jar_path(line: str | None = None) -> Path | None:
    """The locality jar of ``line`` (:func:`find_jar`), None when it is not there."""
    found = find_jar(line)
    return found.path if found else None


def with_jar(jars: str | None, line: str | None = None) -> str | None:
    """A ``spark.jars`` / ``--jars`` value that also ships ``line``'s locality jar (when it exists)."""
    jar = jar_path(line)
    have = [j for j in (jars or "").split(",") if j]
    if jar is not None and str(jar) not in have:
        have.append(str(jar))
    return ",".join(have) or None


def locality_conf(jars: str | None = None, extensions: str | None = None, line: str | None = None) -> dict[str, str]:
    """The settings a job on Spark ``line`` (default: :func:`local_line`) starts with to read
    through ``colocatefile://``: that line's jar on the driver's and executors' classpath, the
    scheme's class (and the replica file system's, spark.replica_paths), and the session extension of the same jar when the line has it (joined to
    ``extensions``, the job's own). Spark's catalog copies the Hadoop settings, and the session its
    extensions, when the session starts, so none can be added later; empty without the jar."""
    jar = jar_path(line)
    if jar is None:
        return {}
    conf = {"spark.jars": with_jar(jars, line) or "", f"spark.hadoop.fs.{SCHEME}.impl": FS_CLASS,
            f"spark.hadoop.fs.{SCHEME}.impl.disable.cache": "true", **replica_paths.conf()}
    if jar_has_ordered(jar):
        have = [e.strip() for e in (extensions or "").split(",") if e.strip()]
        conf["spark.sql.extensions"] = ",".join([*have, *([] if EXTENSIONS_CLASS in have else [EXTENSIONS_CLASS])])
    return conf


def roots_spec(backend_hosts: Mapping[str, str]) -> str:
    """``host=root`` lines for the local backends (root URI -> host); object stores are skipped."""
    lines = []
    for root, host in sorted(backend_hosts.items()):
        if fs.is_local(root) and host:
            lines.append(f"{host}={fs.local_path(root).rstrip('/') or '/'}")
    return "\n".join(lines)


def _class_loadable(spark) -> bool:
    if is_connect(spark):  # no JVM to ask: the server's classpath is not the client's to see
        return False
    from py4j.protocol import Py4JError

    try:
        return bool(spark._jvm.org.apache.spark.util.Utils.classIsLoadable(FS_CLASS))
    except Py4JError:  # no JVM to ask (a Spark Connect session): no locality
        return False


ORDERED_READ_KEY = "spark.colocate.sortedScan"


def ordered_read(spark) -> bool:
    """Whether this session reads a colocated bucket's key-sorted files in order instead of sorting
    them for a sort-merge join: the jar's extension is loaded and ``spark.colocate.sortedScan`` is
    not ``false`` (a job may turn it off). On Spark Connect the server's own setting is trusted: a
    server started without the jar logs the missing extension and runs every query without it."""
    return (spark.conf.get(ORDERED_READ_KEY, "true") or "true").strip().lower() == "true" and extension_loaded(spark)


def extension_loaded(spark) -> bool:
    """Whether this session runs the jar's extension (the ordered read, the columnar join, the
    coalesced read of a group created at a multiple of another's count): a Spark line whose jar
    has it, named in ``spark.sql.extensions``, and loadable."""
    if is_connect(spark):
        return EXTENSIONS_CLASS in (spark.conf.get("spark.sql.extensions", "") or "")
    from py4j.protocol import Py4JError

    line = session_line(spark)
    if line is not None and ORDERED not in LINES[line].features:
        announce_line(spark)
        return False
    try:
        if EXTENSIONS_CLASS not in (spark.conf.get("spark.sql.extensions", "") or ""):
            return False
        return bool(spark._jvm.org.apache.spark.util.Utils.classIsLoadable(EXTENSIONS_CLASS))
    except Py4JError:  # no JVM to ask (a Spark Connect session)
        return False


def settings(spark, backend_hosts: Mapping[str, str]) -> tuple[dict[str, str | None], str | None]:
    """The session settings that turn local reads on for what is registered next, and why local
    reads are off (None: on). Off, the roots are unset (None), so an earlier read's do not apply.
    A job holds them for its run only (:func:`airflow_colocate.spark.session.scoped`)."""
    off: dict[str, str | None] = {ROOTS_KEY: None}
    master = connect_master(spark)
    if master.startswith("local"):
        return off, "local master: every task runs on this host"
    if is_connect(spark):
        say_once("locality off on Spark Connect: local reads need the locality jar on the server and its "
                 f"fs.{SCHEME}.impl setting; bucket tasks run on any executor (results are the same)")
        return off, "a Spark Connect session"
    spec = roots_spec(backend_hosts)
    if not spec:
        return off, "no backend on a local file system"
    if not _class_loadable(spark):
        line = session_line(spark)
        jar = jar_path(line) if line else None
        where = f"{jar} is not on the job's classpath" if jar else \
            f"{jar_name(line) if line else 'a locality jar for Spark ' + spark.version} is not in the package (a wheel carries it; scripts/setup.sh builds it in a checkout; or set ${JAR_ENV})"
        _say_once(f"locality off: {where}; bucket tasks run on any executor (locality ANY)")
        return off, "the locality jar is absent"
    if spark.sparkContext._jsc.hadoopConfiguration().get(f"fs.{SCHEME}.impl") is None:
        # Spark's catalog copied the Hadoop settings when the session started: too late to add it
        _say_once(f"locality off: the session was started without spark.hadoop.fs.{SCHEME}.impl={FS_CLASS} "
                  f"(get_spark and the operators set it with the jar)")
        return off, f"the session does not know the {SCHEME} scheme"
    # session settings, which Spark copies into each query's Hadoop configuration
    return {f"fs.{SCHEME}.impl": FS_CLASS,
            f"fs.{SCHEME}.impl.disable.cache": "true",  # the roots are read per query
            ROOTS_KEY: spec}, None


def read_location(spark, path: str) -> str:
    """The LOCATION a registration gives a replica directory: under ``colocatefile://`` when local
    reads are on and the path is local, else the path itself."""
    if not spark.conf.get(ROOTS_KEY, "") or not path or urlsplit(path).scheme not in ("", "file"):
        return path
    return f"{SCHEME}://{fs.local_path(path)}"


def host_of(path: str, backend_hosts: Mapping[str, str]) -> str | None:
    """The host of the backend whose root contains ``path`` (longest root wins)."""
    best = None
    for root, host in backend_hosts.items():
        r = root.rstrip("/")
        if (path == r or path.startswith(r + "/")) and (best is None or len(r) > len(best[0])):
            best = (r, host)
    return best[1] if best else None


def line(loc: JoinLocality) -> str:
    """The task log's (and the explain's) one line about where the bucket tasks ran."""
    if not loc.tasks:
        return f"locality: unknown ({loc.note or 'no task read input'})"
    pct = 100.0 * loc.node_local / loc.tasks
    levels = ", ".join(f"{k} {v}" for k, v in sorted(loc.levels.items()))
    text = (f"locality: {loc.node_local}/{loc.tasks} input tasks node-local ({pct:.0f}%: {levels}), "
            f"{loc.bytes_remote} of {loc.bytes_read} bytes read from a non-local backend")
    return text + (f" ({loc.note})" if loc.note else "")


def bucket_hosts(tables: Sequence[ReadTable], backend_hosts: Mapping[str, str]) -> list[set[str]] | None:
    """Per bucket seq (the task of a bucketed scan), the hosts of the replicas the bucketed tables
    read (None: no bucketed table, or bucketed tables read at different counts). A table read
    coalesced adds bucket b's hosts to task b mod its read count."""
    bucketed = [t for t in tables if t.bucketed]
    if not bucketed or len({t.read_buckets or t.bucket_num for t in bucketed}) != 1:
        return None
    out: list[set[str]] = [set() for _ in range(bucketed[0].read_buckets or bucketed[0].bucket_num)]
    for t in bucketed:
        for part in t.partitions:
            for b, path in enumerate(part.bucket_paths):
                host = host_of(path, backend_hosts) if path else None
                if host:
                    out[b % len(out)].add(host)
    return out


def _get(url: str):
    with urllib.request.urlopen(url, timeout=60) as r:  # the UI's first answer can take seconds
        return json.load(r)


def measure(spark, job_group: str, bucket_hosts: Sequence[set[str]] | None, *, note: str = "",
            wait_s: float = 10.0) -> JoinLocality:
    """Tasks of the jobs in ``job_group`` that read input, from the status REST API.

    ``bucket_hosts[b]`` are the hosts of the replicas bucket *b* reads (a colocated join: task *b*
    of a bucketed scan stage reads bucket *b*); a task of such a stage read remotely when it ran
    elsewhere. Other input tasks count as remote when Spark did not run them node-local."""
    out = JoinLocality(note=note)
    if is_connect(spark):
        out.note = note or "a Spark Connect client cannot read the server's status API"
        return out
    sc = spark.sparkContext
    if (sc.master or "").startswith("local"):
        out.note = note or "local master: every task runs on this host"
        return out
    url = sc.uiWebUrl
    if not url:
        out.note = "the Spark UI is off (spark.ui.enabled=false): no status API"
        return out
    tracker = sc.statusTracker()
    infos = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(job_group)]
    stages = sorted({s for info in infos if info is not None for s in (info.stageIds or [])})
    base = f"{url.rstrip('/')}/api/v1/applications/{sc.applicationId}/stages"
    deadline = time.monotonic() + wait_s
    try:
        for stage in stages:
            while True:  # the status store is fed asynchronously: wait for the stage's last tasks
                try:
                    every = _get(f"{base}/{stage}")
                except urllib.error.HTTPError:  # a stage the store does not know (never submitted)
                    attempts = []
                    break
                attempts = [a for a in every if a.get("status") in ("COMPLETE", "FAILED", "SKIPPED")]
                # A SKIPPED stage (its shuffle output was reused) ran no task: it is done as it is.
                # Counting its tasks as pending made every query wait the whole 10 s on clusters.
                done = attempts and all(a.get("status") == "SKIPPED" or a.get("numCompleteTasks", 0)
                                        + a.get("numFailedTasks", 0) + a.get("numKilledTasks", 0) >= a.get("numTasks", 0)
                                        for a in attempts)
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            for a in attempts:
                if a.get("status") == "SKIPPED" or not a.get("inputBytes"):
                    continue
                tasks = _get(f"{base}/{stage}/{a['attemptId']}/taskList?length=1000000")
                bucketed = bucket_hosts is not None and a.get("numTasks") == len(bucket_hosts)
                for t in tasks:
                    if t.get("status") != "SUCCESS":
                        continue
                    level = t.get("taskLocality", "?")
                    read = int(((t.get("taskMetrics") or {}).get("inputMetrics") or {}).get("bytesRead", 0))
                    out.tasks += 1
                    out.levels[level] = out.levels.get(level, 0) + 1
                    out.node_local += level in LOCAL_LEVELS
                    out.bytes_read += read
                    local = t.get("host") in bucket_hosts[t["index"]] if bucketed else level in LOCAL_LEVELS
                    out.bytes_remote += 0 if local else read
    except OSError as exc:
        out.note = f"the status API did not answer: {exc}"
    return out


def executor_hosts(spark) -> set[str]:
    """The hosts of the executors registered now (not the driver's)."""
    # From the status store, whose entries name the driver "driver". Not SparkEnv's block manager:
    # on Spark 4.3 py4j cannot reflect on SparkEnv (a method's signature names unshaded protobuf
    # classes the distribution does not ship: NoClassDefFoundError, then "o245.blockManager").
    executors = spark.sparkContext._jsc.sc().statusStore().executorList(True)
    out = set()
    for i in range(executors.size()):
        e = executors.apply(i)
        if e.id() != "driver":
            out.add(e.hostPort().rsplit(":", 1)[0])
    return out


def wait_for_executors(spark, hosts: set[str], timeout_s: float) -> set[str]:
    """Wait (at most ``timeout_s``) until an executor runs on each of ``hosts``; the hosts still
    without one. Why: a task is scheduled the moment the job starts, and one whose host's executor
    is still starting runs elsewhere once the locality wait (3 s) is over."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = hosts - executor_hosts(spark)
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.2)


def track(spark, job_id: str, bucket_hosts: Sequence[set[str]] | None = None) -> str:
    """Tag the Spark jobs that follow with a job group, for :func:`measure`; returns the group.
    With local reads on, first wait for an executor on each host that ``bucket_hosts`` read from
    (``spark.colocate.locality.executorWaitSeconds``, default 15)."""
    if bucket_hosts and spark.conf.get(ROOTS_KEY, ""):
        wait = float(spark.conf.get("spark.colocate.locality.executorWaitSeconds", "15"))
        missing = wait_for_executors(spark, set().union(*bucket_hosts), wait)
        if missing:
            log.info(f"no executor on {', '.join(sorted(missing))} after {wait:.0f}s: the buckets stored there "
                f"run on other hosts (is --host the name the Spark worker there registers with?)")
    group = f"colocate-{job_id}"
    if is_connect(spark):  # no job group on Connect: an operation tag (session.scoped restores the tags)
        spark.addTag(group)
        return group
    spark.sparkContext.setJobGroup(group, f"colocate join {job_id}")
    return group


def untrack(spark) -> None:
    """Stop tagging: what follows (the preview) is not the join's reads."""
    if is_connect(spark):
        for tag in list(spark.getTags()):
            if tag.startswith("colocate-"):
                spark.removeTag(tag)
        return
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def located(spark, table: ReadTable) -> ReadTable:
    """``table`` with its replica directories as :func:`read_location` spells them."""
    if not spark.conf.get(ROOTS_KEY, ""):
        return table
    parts = [replace(p, bucket_paths=[read_location(spark, path) for path in p.bucket_paths]) for p in table.partitions]
    return replace(table, partitions=parts)
