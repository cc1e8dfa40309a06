"""A SparkSession with the settings colocated reads and writes rely on, and :func:`scoped`, the one
way a job changes a session it may share with its caller."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from airflow_colocate.spark.connect import is_connect, scoped_connect
from airflow_colocate.spark import object_stores
from airflow_colocate.spark.locality import local_line, locality_conf
from airflow_colocate.spark.shipping import ship


# Comma-separated settings get_spark adds entries to. The builder's value of a setting replaces the
# one spark-submit was given (``--jars``, ``--conf``), so get_spark joins the submitted entries in
# front of its own: without that a user's jars would reach the driver's classpath (spark-submit
# put them there) but never the executors, and a user's session extensions would not be loaded.
# Both are read when a SparkContext starts; an application already running keeps its own.
KEPT_LISTS = ("spark.jars", "spark.sql.extensions")


def _submitted_conf():
    """The SparkConf spark-submit (or its spark-defaults.conf) gave this process's JVM; None in a
    plain ``python``, where no JVM runs yet and so nothing was submitted."""
    from pyspark import SparkConf, SparkContext

    if os.environ.get("PYSPARK_GATEWAY_PORT") is None and SparkContext._gateway is None:
        return None
    SparkContext._ensure_initialized()
    return SparkConf()


def _entry_key(key: str, entry: str) -> str:
    """What makes two entries one: a jar given as a path and as a ``file:`` URI is one jar
    (spark-submit turns ``--jars`` paths into ``file:`` URIs)."""
    if key != "spark.jars":
        return entry
    parts = urlsplit(entry)
    if parts.scheme in ("", "file"):
        return "file:" + os.path.abspath(parts.path if parts.scheme else entry)
    return entry


def join_lists(key: str, *values: str | None) -> str:
    """The comma-separated ``values`` of setting ``key`` as one, each entry once, in order."""
    out: dict[str, str] = {}
    for value in values:
        for entry in (value or "").split(","):
            if entry.strip():
                out.setdefault(_entry_key(key, entry.strip()), entry.strip())
    return ",".join(out.values())


def get_spark(app_name: str, master: str | None = None, conf: dict[str, str] | None = None):
    """Build (or return the active) SparkSession.

    The master is ``master``, else ``$SPARK_MASTER``, else what spark-submit set, else
    ``local[*]``. Always on: bucketing, ``requireAllClusterKeysForCoPartition=false`` (a join on
    ``(dt, key)`` bucketed by ``key`` stays shuffle-free) and an in-memory catalog. ``conf`` wins
    over every default here. The locality jar (:mod:`airflow_colocate.spark.locality`), when
    built, is shipped with the session (its ``spark.jars`` joins those of ``conf``), and so is
    this package (:func:`airflow_colocate.spark.shipping.ship`: once per application, not for a
    ``local`` master), so executors of a cluster that never installed it import it all the same.
    When the environment names an S3 API, hadoop-aws and the store's address come too
    (:mod:`airflow_colocate.spark.object_stores`). Under spark-submit, the jars and session
    extensions it was given come first and stay (:data:`KEPT_LISTS`): the builder's value would
    replace them. A SparkContext already running is returned with its jars and extensions as they
    are.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    submitted = _submitted_conf()
    master = (master or os.environ.get("SPARK_MASTER")
              or (submitted.get("spark.master", None) if submitted is not None else None) or "local[*]")
    settings: dict[str, str] = {
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.sources.bucketing.enabled": "true",
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
    }
    # Spark lists a scan's partition directories with a Spark job (one task each) above 32 of
    # them: ~1-2 s a table per query at a few hundred replica directories. The driver lists every
    # one anyway (each is checked against the catalog before it is read), so it lists them for
    # Spark too: all of them on one machine, up to a few thousand on a cluster.
    settings["spark.sql.sources.parallelPartitionDiscovery.threshold"] = (
        "100000" if master.startswith("local") else "4096")
    if master.startswith("local"):
        # Executors are this machine's Python: the one running now, which has this package.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings["spark.sql.shuffle.partitions"] = str(max(4, 2 * (os.cpu_count() or 2)))
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # read when the JVM starts
        # The in-memory catalog never needs a warehouse; keep Spark from creating one in the cwd.
        settings["spark.sql.warehouse.dir"] = Path(tempfile.gettempdir(), "colocate-spark-warehouse").as_uri()
        settings["spark.driver.host"] = os.environ["SPARK_LOCAL_IP"]
    s3a = object_stores.s3a_conf(local_line(), master)
    shipped = s3a.pop("spark.jars", None)
    settings.update(s3a)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    if shipped:
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars"), shipped) if j)
    settings.update(locality_conf(settings.get("spark.jars"), settings.get("spark.sql.extensions")))
    for key in KEPT_LISTS:
        if SparkContext._active_spark_context is not None:
            # getOrCreate hands back the running application, whose jars and extensions are fixed:
            # the builder would only write a value Spark never applied into the caller's session
            settings.pop(key, None)
        elif key in settings and submitted is not None:
            settings[key] = join_lists(key, submitted.get(key, None), settings[key])
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    ship(spark)
    return spark


# setJobGroup / setJobDescription: local properties of the calling thread
_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextmanager
def scoped(spark, conf: Mapping[str, str | None] | None = None, *, job_group: tuple[str, str] | None = None,
           description: str | None = None) -> Iterator[None]:
    """Run a block with ``conf`` set (a value of None unsets the key for the block) and, when
    given, a ``job_group`` ``(id, description)`` or a job ``description``; afterwards, on success
    and on failure alike, every key of ``conf`` has its previous value again (or is unset again)
    and this thread's job group and description are what they were, whatever the block set them to.

    Why: the jobs run in the caller's own session too (``write_in_session``, ``join_in_session``,
    a notebook); a setting a job needs must not change what the caller's next query does."""
    conf = dict(conf or {})
    if is_connect(spark):  # no SparkContext on Spark Connect: tags stand for the job group
        yield from scoped_connect(spark, conf, job_group)
        return
    sc = spark.sparkContext
    saved = {key: spark.conf.get(key, None) for key in conf}  # None: not set in this session
    properties = {key: sc.getLocalProperty(key) for key in _JOB_PROPERTIES}
    try:
        _set(spark, conf)
        if job_group is not None:
            sc.setJobGroup(*job_group)
        elif description is not None:
            sc.setJobDescription(description)
        yield
    finally:
        _set(spark, saved)
        for key, value in properties.items():
            sc.setLocalProperty(key, value)


def _set(spark, conf: Mapping[str, str | None]) -> None:
    for key, value in conf.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
