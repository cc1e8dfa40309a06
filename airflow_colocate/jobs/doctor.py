"""What ``colocate doctor`` finds: each check answers one question a deployment asks (is the
package the wheel's, which catalog and from where, which Java, which jar per Spark line, can every
backend be probed, what does a cluster's executor run) and, when the answer is a problem, adds one
line to the problems. Nothing is changed: the catalog is only read (a SQLite file that does not
exist is reported, never created), and the backend probe is the heartbeat's own
(:func:`airflow_colocate.storage.probe.probe_root`). The CLI renders the facts and the problems.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from importlib import metadata
from pathlib import Path

from airflow_colocate.core.errors import summary
from airflow_colocate.core.spark_lines import LINES, MIN_PYTHON

DISTRIBUTION = "airflow-colocate"


def examine(where: Callable[[], tuple[str, str, str]], open_catalog: Callable[[str], object], *,
            master: str | None, spark_version: str | None, timeout: float) -> dict:
    """Every fact, with ``problems``: the list of one-line problems found (empty when all is well)."""
    problems: list[str] = []
    facts = {
        "package": package_facts(),
        "python": {"version": _version(sys.version_info), "executable": sys.executable},
        "pyspark": pyspark_facts(problems),
        "java": java_facts(problems),
        "jar": jar_facts(problems),
    }
    catalog, facts["catalog"] = catalog_facts(where, open_catalog, problems)
    facts["backends"] = backend_facts(catalog, problems, timeout) if catalog is not None else []
    facts["object_stores"] = object_store_facts(facts["backends"], problems)
    facts["iceberg"] = iceberg_facts(catalog, problems) if catalog is not None else []
    facts["line"] = line_facts(master, spark_version, problems) if master else None
    facts["executor"] = executor_facts(master, problems, facts["line"]) if master else None
    facts["problems"] = problems
    return facts


def _version(info) -> str:
    return ".".join(str(part) for part in tuple(info)[:3])


def package_facts() -> dict:
    """Version and where the package is imported from; ``editable`` for a source checkout (its
    files are the checkout's, not a copy in ``site-packages``)."""
    import airflow_colocate

    location = Path(airflow_colocate.__file__).resolve().parent
    try:
        direct = json.loads(metadata.distribution(DISTRIBUTION).read_text("direct_url.json") or "{}")
        editable = bool(direct.get("dir_info", {}).get("editable", False))
    except metadata.PackageNotFoundError:  # imported from a path nobody installed
        editable = True
    return {"version": airflow_colocate.__version__, "location": str(location), "editable": editable}


def pyspark_facts(problems: list[str]) -> dict:
    """The installed PySpark against the one the package is built for (its jar too)."""
    wanted = next((r.split("==", 1)[1].split(";")[0].strip() for r in _requires() if r.replace(" ", "").startswith("pyspark==")), None)
    try:
        have = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        have = None
    if have is None:
        problems.append(f"pyspark is not installed: install pyspark=={wanted or '<the pinned version>'}")
    elif wanted and have != wanted:
        problems.append(f"pyspark {have} is installed, the package is built for {wanted}: install pyspark=={wanted}")
    return {"version": have, "required": wanted}


def _requires() -> list[str]:
    try:
        return metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []


_JAVA_VERSION = re.compile(r'version "([^"]+)"')


def java_facts(problems: list[str]) -> dict:
    """The java PySpark launches: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).is_file():
        where = f"JAVA_HOME={home} holds no bin/java" if home else "no java on PATH"
        problems.append(f"Java 17 or newer is required by PySpark 4 and {where}: install openjdk-17-jre-headless "
                        f"or set JAVA_HOME")
        return {"path": java, "version": None, "major": None}
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
        found = _JAVA_VERSION.search(done.stderr + done.stdout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        problems.append(f"{java} -version failed ({exc}): fix the Java installation or JAVA_HOME")
        return {"path": java, "version": None, "major": None}
    version = found.group(1) if found else None
    leading = re.match(r"(?:1\.)?(\d+)", version or "")  # 1.8.0_292 is Java 8, 17.0.15 is 17
    major = int(leading.group(1)) if leading else None
    if major is None or major < 17:
        problems.append(f"{java} is Java {version or 'of an unknown version'}; PySpark 4 needs Java 17 or newer")
    return {"path": java, "version": version, "major": major}


def jar_facts(problems: list[str]) -> dict:
    """Which locality jar jobs ship, and from where (:func:`airflow_colocate.spark.locality.find_jar`)."""
    from airflow_colocate.spark import locality

    env = os.environ.get(locality.JAR_ENV)
    if env and not Path(env).is_file():
        problems.append(f"${locality.JAR_ENV}={env} is not a file: point it at the locality jar or unset it")
    per_line = {line: (str(j.path) if (j := locality.find_jar(line)) else None) for line in LINES}
    missing = [line for line, path in per_line.items() if path is None]
    if missing and len(missing) < len(per_line):
        problems.append(f"no locality jar for Spark {', '.join(missing)}: jobs on those clusters run without local reads")
    try:
        found = locality.find_jar()
    except ValueError:  # this pyspark is of no supported line: say which jars there are
        found = None
    if found is None:
        problems.append("the locality jar is missing: local reads and the ordered bucket read are off "
                        "(install the wheel, which carries it, or run scripts/setup.sh in a checkout)")
        return {"found": False, "path": None, "origin": None, "in_package": False, "lines": per_line}
    return {"found": True, "path": str(found.path), "origin": found.origin, "in_package": found.origin == "package",
            "lines": per_line}


def catalog_facts(where: Callable[[], tuple[str, str, str]], open_catalog: Callable[[str], object],
                  problems: list[str]):
    """The catalog (None when it cannot be used) and what was found about it. ``where`` names the
    URL the caller would open and where it came from; ``open_catalog`` opens it unchecked (the
    caller disposes of it)."""
    from sqlalchemy.engine import make_url

    from airflow_colocate.catalog.migrate import current_revision, head_revision
    from airflow_colocate.core.errors import ColocateError

    facts: dict = {"url": None, "source": None, "source_detail": None, "schema": None,
                   "code_schema": head_revision(), "reachable": False}
    try:
        url, facts["source"], facts["source_detail"] = where()
        parsed = make_url(url)
    except ColocateError as exc:
        problems.append(str(exc))
        return None, facts
    except Exception as exc:
        problems.append(f"invalid catalog URL: {exc}")
        return None, facts
    facts["url"] = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).expanduser().is_file():
        problems.append(f"catalog {facts['url']} does not exist: run 'colocate init' (or point --catalog, "
                        f"$COLOCATE_CATALOG_URL or the connection at the catalog)")
        return None, facts
    try:
        catalog = open_catalog(url)
        facts["schema"] = current_revision(catalog.engine)
        facts["reachable"] = True
    except Exception as exc:
        problems.append(f"catalog {facts['url']} cannot be read: {' '.join(str(exc).split())[:300]}")
        return None, facts
    if facts["schema"] != facts["code_schema"]:
        problems.append(f"catalog {facts['url']} is at schema {facts['schema'] or 'none'}, the code needs "
                        f"{facts['code_schema']}: run 'colocate init'")
        return None, facts
    return catalog, facts


def iceberg_facts(catalog, problems: list[str]) -> list[dict]:
    """Each table published as an Iceberg table, and a problem for each whose metadata lags ours."""
    from airflow_colocate.jobs.iceberg import lag

    pubs = catalog.iceberg.list()
    lines = lag(catalog) if pubs else []
    problems += lines
    return [{"table": p.table, "warehouse": p.warehouse, "snapshot_id": p.snapshot_id,
             "lags": any(line.startswith(p.table + ":") for line in lines)} for p in pubs]


def backend_facts(catalog, problems: list[str], timeout: float) -> list[dict]:
    """Each backend's heartbeat probe (identity marker included) and the marker it holds."""
    from airflow_colocate.storage import identity
    from airflow_colocate.storage.probe import probe_root

    backends = [b for b in catalog.backends.list() if b.state != "decommissioned"]
    if not backends:
        return []
    tokens, uid = catalog.backends.markers(), catalog.backends.catalog_uid()

    def check(b) -> dict:
        marker = {"backend_id": b.id, "catalog_id": uid, "token": tokens[b.id]} if tokens.get(b.id) else None
        row = {"id": b.id, "name": b.name, "host": b.host, "root": b.root_uri, "state": b.state,
               "reachable": False, "marker": None, "error": None}
        try:
            probe_root(b.root_uri, marker=marker, tidy=True)
            row["reachable"] = True
        except Exception as exc:
            row["error"] = summary(exc)[0]  # pyarrow's 89 lines for an hdfs:// root without libjvm: the first
        try:
            found = identity.read_marker(b.root_uri)
            row["marker"] = None if found is None else {"backend_id": found.get("backend_id"), "name": found.get("name")}
        except Exception:  # the probe's error already says why the root cannot be read
            pass
        return row

    pool = ThreadPoolExecutor(max_workers=min(16, len(backends)), thread_name_prefix="colocate-doctor")
    futures = [(b, pool.submit(check, b)) for b in backends]
    rows = []
    try:
        for b, future in futures:
            try:
                rows.append(future.result(timeout=timeout))
            except FutureTimeout:
                rows.append({"id": b.id, "name": b.name, "host": b.host, "root": b.root_uri, "state": b.state,
                             "reachable": False, "marker": None, "error": f"no answer within {timeout}s"})
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for row in rows:
        if not row["reachable"]:
            problems.append(f"backend {row['name']} ({row['root']}) is not reachable: {row['error']}")
    return rows


def object_store_facts(backends: list[dict], problems: list[str]) -> dict | None:
    """For S3 backends: where the key comes from (never the key), the endpoint, and the hadoop-aws
    jars a job ships for this side's Spark line; None when no backend is on S3."""
    from airflow_colocate.spark import object_stores
    from airflow_colocate.spark.locality import local_line
    from airflow_colocate.storage import s3

    if not any(s3.is_s3(b["root"]) for b in backends):
        return None
    line = local_line()
    jars = object_stores.jars(line)
    facts = {"endpoint": os.environ.get("AWS_ENDPOINT_URL") or "AWS (the SDK's default for the region)",
             "credentials": object_stores.credentials_source(), "hadoop_aws": jars,
             "server_side_copy": s3.has_client()}
    if not jars:
        problems.append(f"S3 backends, but no hadoop-aws for Spark {line} here ({', '.join(object_stores.coordinates(line))}): "
                        f"run scripts/setup.sh --with-s3, set {object_stores.ENV_JARS}, or make sure the cluster has them")
    if not facts["server_side_copy"]:
        problems.append("S3 backends, but no boto3: clones between them cannot be server-side copies "
                        "(pip install 'airflow-colocate[s3]')")
    return facts


def _executor_probe():
    """A function Spark runs on executors, pickled by value (it is built here, not imported there),
    so it runs even where this package cannot be imported: that is what it finds out."""

    def probe(_):
        import socket
        import sys as executor_sys

        seen = {"host": socket.gethostname(), "python": ".".join(map(str, executor_sys.version_info[:3])),
                "pyarrow": None, "imports_package": False, "package_location": None, "package_version": None,
                "error": None}
        try:
            import pyarrow

            seen["pyarrow"] = pyarrow.__version__
        except ImportError:
            pass
        try:
            import airflow_colocate as package

            seen.update(imports_package=True, package_location=package.__file__,
                        package_version=package.__version__)
        except Exception as exc:
            seen["error"] = f"{type(exc).__name__}: {exc}"
        yield seen

    return probe


def local_version() -> str:
    from pyspark.version import __version__

    return __version__


def line_facts(master: str, spark_version: str | None, problems: list[str]) -> dict | None:
    """The Spark line of ``--master``'s cluster (``--spark-version``, else ``spark-submit --version``
    on PATH, as a job learns it) and the jar a job would ship there, with what the line runs without."""
    from airflow_colocate.core.errors import ColocateError
    from airflow_colocate.core.spark_lines import missing_features
    from airflow_colocate.spark import lines, locality

    try:
        if master.startswith("local") and not spark_version:  # runs in this pyspark's JVM
            spark_version = local_version()
        # as the operators do (operators/spark_env.py: submit_env): this pyspark's spark-submit when
        # none is on PATH
        path = os.environ.get("PATH", "")
        if not shutil.which("spark-submit", path=path) and not os.environ.get("SPARK_HOME"):
            path = f"{path}{os.pathsep}{Path(importlib.util.find_spec('pyspark').origin).parent / 'bin'}"
        line = lines.submit_line(spark_version, None, path, "--master (give --spark-version)")
    except ColocateError as exc:
        problems.append(str(exc))
        return None
    found = locality.find_jar(line.line)
    if found is None:
        problems.append(f"no locality jar for Spark {line.line} in the package: local reads are off on that cluster")
    missing = missing_features(line.line)
    return {"line": line.line, "scala": line.scala, "jar": str(found.path) if found else None,
            "without": list(missing), "why": LINES[line.line].why_not if missing else ""}


def executor_facts(master: str, problems: list[str], line: dict | None = None) -> dict:
    """Start a session on ``master`` as the jobs do (:func:`airflow_colocate.spark.session.get_spark`,
    which ships the package with it) and run one task per default partition. A cluster of another
    Spark line than this pyspark's is asked through its own spark-submit (:func:`_submitted_probe`)."""
    from airflow_colocate.spark.locality import local_line
    from airflow_colocate.spark.session import get_spark

    facts: dict = {"master": master, "executors": [], "error": None}
    if line is not None and line["line"] != local_line():
        return _submitted_probe(master, problems, facts)
    spark, owned = None, False
    try:
        from pyspark.sql import SparkSession

        owned = SparkSession.getActiveSession() is None
        spark = get_spark("colocate-doctor", master=master, conf={"spark.ui.enabled": "false"})
        if owned:
            spark.sparkContext.setLogLevel("ERROR")
        sc = spark.sparkContext
        facts["master"] = sc.master  # an active session of the caller's is used as it is
        slices = max(1, min(8, sc.defaultParallelism))
        seen = sc.parallelize(range(slices), slices).mapPartitions(_executor_probe()).collect()
    except Exception as exc:
        facts["error"] = summary(exc, 500)[0]  # a JVM's message: its exception's line, not the stack trace
        problems.append(f"a Spark job on {master} failed: {facts['error']}")
        return facts
    finally:
        if spark is not None and owned:
            spark.stop()
    unique = {tuple(sorted((k, str(v)) for k, v in s.items())): s for s in seen}
    facts["executors"] = list(unique.values())
    driver = ".".join(map(str, sys.version_info[:2]))
    for s in facts["executors"]:
        where = f"an executor on {s['host']}"
        if not s["imports_package"]:
            problems.append(f"{where} cannot import airflow_colocate ({s['error']}): ship the package with the job "
                            f"or install it on the workers")
        if s["pyarrow"] is None:
            problems.append(f"{where} has no pyarrow: install pyarrow on the workers")
        if tuple(int(x) for x in s["python"].split(".")[:2]) < MIN_PYTHON:
            problems.append(f"{where} runs Python {s['python']}: jobs need {'.'.join(map(str, MIN_PYTHON))} or newer "
                            f"(set PYSPARK_PYTHON)")
        if ".".join(s["python"].split(".")[:2]) != driver:
            problems.append(f"{where} runs Python {s['python']}, the driver {driver}: PySpark needs the same minor "
                            f"version (set PYSPARK_PYTHON)")
    return facts


_PROBE_APP = """
import inspect, json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("colocate-doctor").config("spark.ui.enabled", "false").getOrCreate()
sc = spark.sparkContext
sc.setLogLevel("ERROR")
ns = {}
exec(sys.argv[1], ns)
n = max(1, min(8, sc.defaultParallelism))
print("PROBE " + json.dumps(sc.parallelize(range(n), n).mapPartitions(ns["_executor_probe"]()).collect()))
spark.stop()
"""


def _submitted_probe(master: str, problems: list[str], facts: dict) -> dict:
    """The executor probe as an application of the cluster's own spark-submit (on PATH), its driver
    on ``$PYSPARK_DRIVER_PYTHON`` / ``$PYSPARK_PYTHON``: a pyspark of another line cannot drive it."""
    import inspect
    import json
    import subprocess
    import tempfile

    from airflow_colocate.spark.lines import find_binary

    binary = find_binary(None)
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="colocate-doctor-") as app:
        app.write(_PROBE_APP)
        app.flush()
        try:
            done = subprocess.run([binary or "spark-submit", "--master", master, app.name,
                                   inspect.getsource(_executor_probe)], capture_output=True, text=True, timeout=300)
            out = next((x for x in done.stdout.splitlines() if x.startswith("PROBE ")), None)
            if out is None:
                raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1])
            seen = json.loads(out[len("PROBE "):])
        except Exception as exc:
            facts["error"] = " ".join(str(exc).split())[:500]
            problems.append(f"a Spark job on {master} failed: {facts['error']}")
            return facts
    facts["executors"] = list({tuple(sorted((k, str(v)) for k, v in s.items())): s for s in seen}.values())
    for s in facts["executors"]:
        if s["pyarrow"] is None:
            problems.append(f"an executor on {s['host']} has no pyarrow: install pyarrow on the workers")
        if tuple(int(x) for x in s["python"].split(".")[:2]) < MIN_PYTHON:
            problems.append(f"an executor on {s['host']} runs Python {s['python']}: jobs need "
                            f"{'.'.join(map(str, MIN_PYTHON))} or newer (set PYSPARK_PYTHON)")
    return facts
