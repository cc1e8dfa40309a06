"""Issue 27, "jobs that ship what they need": a Spark standalone cluster (a master and two one-core
workers on loopback) whose workers run a virtualenv of their own holding only pyspark, py4j and
pyarrow — never this package — runs write, import, join, balance (a clone) and verify, and every
result equals plain Spark's.

Both ways a job reaches a cluster are used: the operators (spark-submit with the package's zip in
``--py-files``: write, join, verify) and the CLI (a session of its own that adds the zip once with
``addPyFile``: import, balance). A first test proves the cluster is what it claims: without the
zip its executors cannot import the package, with it they can, and the driver keeps its own copy.
The join also carries a user's own jar and session extension (``tests/spark/user_jar``), which its
query uses on the workers and on the driver: the job's session keeps what spark-submit was given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.verify import ColocateVerifyOperator
from airflow_colocate.operators.write import ColocateWriteOperator
from airflow_colocate.spark.locality import jar_path
from colocate_testing import add_local_backends
from sparkcluster import SHORT_JVM, start_cluster, worker_venv

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

DAY, DAY2 = "2026-11-01", "2026-11-02"
ORDERS = "o_orderkey bigint, o_custkey bigint, o_totalprice decimal(15,2), o_status string, dt date"
LINEITEM = "l_orderkey bigint, l_price bigint, l_flag string, dt date"
CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.executor.memory": "1g"}
# Cluster start, six applications and the checks: ~1.5-2 minutes on 2 idle cores.
STEP_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def bare_cluster(tmp_path_factory):
    """The cluster, its workers on a virtualenv without this package (built from uv's cache)."""
    base = tmp_path_factory.mktemp("bare-cluster")
    try:
        python = worker_venv(base / "worker-venv")
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    cluster = start_cluster(base / "spark", workers=2, python=python)
    yield cluster
    cluster.stop()
    assert cluster.leftover_pids() == [], "Spark cluster processes survived stop()"


def driver_env(cluster, home: Path) -> dict[str, str]:
    """A driver of that cluster: this checkout's Python (it has the package), the executors on the
    workers' Python. Short-lived JVMs compile with C1 only: these jobs are seconds long, and the
    six applications' JVMs were most of the test's CPU time."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_MASTER", "PYTHONPATH")}
    conf_dir = home.parent / "spark-conf"
    conf_dir.mkdir(exist_ok=True)
    # the driver has them from SPARK_SUBMIT_OPTS (tests/conftest.py), which env carries over
    (conf_dir / "spark-defaults.conf").write_text(f"spark.executor.extraJavaOptions {SHORT_JVM}\n")
    env.update(PYSPARK_PYTHON=cluster.python, SPARK_LOCAL_IP="127.0.0.1", COLOCATE_HOME=str(home),
               SPARK_CONF_DIR=str(conf_dir))
    return env


PROBE = r"""
import json, sys
from pyspark.sql import SparkSession


def probe(_):
    import sys
    try:
        import airflow_colocate
        where = airflow_colocate.__file__
    except ModuleNotFoundError as exc:
        where = f"ModuleNotFoundError: {exc}"
    return sys.executable, where


spark = (SparkSession.builder.master(sys.argv[1]).appName("colocate-probe")
         .config("spark.ui.enabled", "false").config("spark.executor.memory", "1g").getOrCreate())
sc = spark.sparkContext
before = sc.parallelize(range(4), 4).map(probe).collect()
from airflow_colocate.spark.shipping import ship
path = list(sys.path)
first, again = ship(spark), ship(spark)
after = sc.parallelize(range(4), 4).map(probe).collect()
print(json.dumps({"before": before, "after": after, "zip": str(first), "again": str(again),
                  "includes": sc._python_includes, "path_kept": path == sys.path,
                  "driver": sys.modules["airflow_colocate"].__file__}))
spark.stop()
"""


def test_executors_import_the_package_only_when_it_is_shipped(bare_cluster, tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE, bare_cluster.master_url], capture_output=True, text=True,
                          env=driver_env(bare_cluster, tmp_path / "home"), timeout=STEP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:] + bare_cluster.logs()
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # the executors run the workers' Python, which has never heard of airflow_colocate ...
    assert {exe for exe, _ in out["before"]} == {bare_cluster.python}
    assert all(w.startswith("ModuleNotFoundError: No module named 'airflow_colocate'") for _, w in out["before"]), out
    # ... until the zip is shipped: once, however often it is asked for
    zip_name = Path(out["zip"]).name
    assert out["again"] == out["zip"] and out["includes"].count(zip_name) == 1
    assert Path(out["zip"]).parent == tmp_path / "home" / "cache" / "py"
    assert all(f"{zip_name}/airflow_colocate/__init__.py" in w for _, w in out["after"]), out
    # the driver keeps importing its own copy (addPyFile's sys.path entry is taken out again)
    assert out["path_kept"] and zip_name not in out["driver"]


def user_jar(folder: Path) -> Path:
    """A user's own jar (``tests/spark/user_jar``): a class a query calls inside its tasks, and a
    session extension adding a SQL function; compiled against this pyspark's jars (~1 s)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    classpath = [str(p) for name in ("spark-sql_", "spark-sql-api_", "spark-catalyst_", "scala-library-",
                                     "scala-reflect-") for p in jars.glob(f"{name}*.jar")]
    sources = sorted(str(p) for p in (Path(__file__).parent / "user_jar").rglob("*.java"))
    classes = folder / "classes"
    subprocess.run(["javac", "--release", "17", "-nowarn", "-d", str(classes), "-cp", os.pathsep.join(classpath),
                    *sources], check=True, capture_output=True, timeout=120)
    jar = folder / "user-udfs.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "colocatetest"], check=True, timeout=60)
    return jar


def orders_source(root: Path, n: int = 1200) -> Path:
    keys = list(range(n))
    root.mkdir(parents=True)
    pq.write_table(pa.table({
        "o_orderkey": pa.array(keys, pa.int64()),
        "o_custkey": pa.array([k % 89 for k in keys], pa.int64()),
        "o_totalprice": pa.array([Decimal(k % 1000) / 4 for k in keys], pa.decimal128(15, 2)),
        "o_status": pa.array([None if k % 11 == 0 else "OFP"[k % 3] for k in keys], pa.string()),
    }), root / "part-0.parquet")
    return root


def lineitem_dataset(root: Path) -> Path:
    """Hive-style ``dt=`` folders for the import: DAY's lines join orders, DAY2's are extra."""
    for i, day in enumerate((DAY, DAY2)):
        folder = root / f"dt={day}"
        folder.mkdir(parents=True)
        n = 3000 + 500 * i
        pq.write_table(pa.table({
            "l_orderkey": pa.array([k // 3 + 7 * i for k in range(n)], pa.int64()),  # some match no order
            "l_price": pa.array(range(n), pa.int64()),
            "l_flag": pa.array(["RAN"[k % 3] for k in range(n)], pa.string()),
        }), folder / "part-0.parquet")
    return root


def colocate_cli(env: dict[str, str], *argv: str) -> dict:
    """``colocate ... --json`` in a process of its own (its Spark session is its own, on the cluster)."""
    done = subprocess.run([sys.executable, "-c", "import sys; from airflow_colocate.cli import main; sys.exit(main())",
                           *argv, "--json"], capture_output=True, text=True, env=env, timeout=STEP_TIMEOUT_S)
    assert done.returncode == 0, f"colocate {' '.join(argv)}: {done.stderr[-3000:]}"
    data, end = json.JSONDecoder().raw_decode(done.stdout)
    assert not done.stdout[end:].strip(), f"--json printed more than one document: {done.stdout[end:][:2000]!r}"
    return data


def replica_rows(catalog, table: str, partition: str) -> tuple[list[tuple], set[int]]:
    """Every row of the visible version, read from every replica with pyarrow; each bucket's
    replicas must hold the same rows. Also: the backends holding them."""
    _, parts = catalog.reads.replicas(table, [partition])
    rows, backends = [], set()
    for bucket in parts[0].buckets:
        copies = []
        for replica in bucket:
            backends.add(replica.backend_id)
            files = sorted(Path(replica.path.removeprefix("file://")).glob("*.parquet"))
            copies.append(sorted(tuple(r.values()) for f in files for r in pq.read_table(f).to_pylist()))
        assert all(c == copies[0] for c in copies), f"replicas of a bucket of {table} {partition} differ"
        rows += copies[0]
    return sorted(rows), backends


def test_write_import_join_balance_verify_on_a_cluster_without_the_package(bare_cluster, spark, tmp_path,
                                                                            monkeypatch):
    env = driver_env(bare_cluster, tmp_path / "home")
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    env["COLOCATE_CATALOG_URL"] = url
    master = urlparse(bare_cluster.master_url)
    for key, value in {**env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": f"spark://{master.hostname}", "port": master.port})}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    catalog = Catalog(url, actor="pytest")
    catalog.init()
    try:
        _run_everything(catalog, env, bare_cluster, spark, tmp_path)
    finally:
        catalog.dispose()


@contextmanager
def step(name: str, seconds: dict[str, float]):
    started = time.monotonic()
    yield
    seconds[name] = round(time.monotonic() - started, 1)


def _run_everything(catalog, env, cluster, spark, tmp_path):
    took: dict[str, float] = {}
    try:
        _steps(catalog, env, cluster, spark, tmp_path, took)
    finally:
        print(f"seconds per step: {took}")  # shown with -s / -rA: where the cluster time goes


def _steps(catalog, env, cluster, spark, tmp_path, took):
    backends = add_local_backends(catalog, tmp_path / "backends")
    orders_src, lineitem_src = orders_source(tmp_path / "orders"), lineitem_dataset(tmp_path / "lineitem")
    plain_orders = spark.read.parquet(str(orders_src))
    plain_lines = spark.read.parquet(str(lineitem_src))

    # write (operator: spark-submit --py-files): the staging runs on the workers
    with step("write", took):
        wrote = ColocateWriteOperator(
            task_id="load_orders", table="orders", source=str(orders_src), partition=DAY, columns=ORDERS,
            dist_cols=["o_orderkey"], bucket_num=4, replication_num=2, partition_col="dt", colocate_with="g",
            conf=CONF).execute(context={})
    assert wrote["rows"] == plain_orders.count() == 1200
    orders_rows, _ = replica_rows(catalog, "orders", DAY)
    assert orders_rows == sorted(tuple(r) for r in plain_orders.collect())

    # import (CLI: its session adds the zip): placing each bucket runs on the workers
    catalog.tables.create("lineitem", parse_columns(LINEITEM), ["l_orderkey"], bucket_num=4, replication_num=2,
                          partition_cols=["dt"], colocate_with="g")
    with step("import", took):
        imported = colocate_cli(env, "import", "lineitem", str(lineitem_src), "--master", cluster.master_url)
    assert sorted(imported["committed"]) == [DAY, DAY2] and not imported["failed"]
    assert imported["rows"] == plain_lines.count() == 6500
    for day in (DAY, DAY2):
        got, _ = replica_rows(catalog, "lineitem", day)
        want = plain_lines.where(f"dt = '{day}'").select("l_orderkey", "l_price", "l_flag").collect()
        assert [r[:3] for r in got] == sorted(tuple(r) for r in want)

    # join (operator): colocated, and the same rows as Spark's own join of the sources. The user's
    # jar and session extension come with it (the operator's ``jars`` and ``conf``): the query calls
    # a class of that jar inside the tasks on the workers, and a function the extension adds, so it
    # runs only if the job's session kept what spark-submit was given beside the locality jar. The
    # driver finds the locality jar through $COLOCATE_LOCALITY_JAR, as in the Docker image (running
    # from the shipped zip, it finds none otherwise, and then sets no spark.jars of its own).
    out = tmp_path / "joined"
    locality_jar = jar_path()
    assert locality_jar is not None, "no locality jar: python build_support/locality_jar.py"
    with step("join", took):
        joined = ColocateJoinOperator(
            task_id="join", conf={**CONF, "spark.sql.extensions": "colocatetest.Extension"}, require_colocate=True,
            jars=str(user_jar(tmp_path / "user-jar")), env_vars={"COLOCATE_LOCALITY_JAR": str(locality_jar)},
            output_path=out.as_uri(),
            tables={"orders": [DAY], "lineitem": [DAY]},
            query=("SELECT o.o_orderkey, o.o_custkey, o.o_status, l.l_price, l.l_flag, "
                   "reflect('colocatetest.Tag', 'of', l.l_flag) AS l_tag, colocate_test_ext() AS ext "
                   "FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey")).execute(context={})
    assert joined["colocate"] is True and "colocate: true" in joined["explain"]
    plain = (plain_orders.join(plain_lines.where(f"dt = '{DAY}'"), plain_orders.o_orderkey == plain_lines.l_orderkey)
             .select("o_orderkey", "o_custkey", "o_status", "l_price", "l_flag").collect())
    got = sorted(tuple(r.values()) for f in sorted(out.rglob("*.parquet")) for r in pq.read_table(f).to_pylist())
    assert len(plain) > 2000 and got == sorted((*r, f"tag:{r.l_flag}", "ext") for r in plain)
    assert joined["rows"] == len(plain)

    # balance (CLI): a new backend gets its share through the Spark clone job on the workers
    (tmp_path / "backends" / "be4").mkdir()
    be4 = catalog.backends.add((tmp_path / "backends" / "be4").as_uri(), name="be4")
    before = {(t, d): replica_rows(catalog, t, d)[0] for t, d in (("orders", DAY), ("lineitem", DAY), ("lineitem", DAY2))}
    with step("balance", took):
        balanced = colocate_cli(env, "balance", "--grace-minutes", "0", "--master", cluster.master_url)
    assert [(j["kind"], j["state"]) for j in balanced["jobs"]] == [("balance", "done")], balanced
    assert balanced["jobs"][0]["cloned"] > 0 and all(g["stable"] for g in balanced["groups"])
    assert be4.id in {b for row in catalog.groups.get("g").bucket_map for b in row}
    for (table, day), rows in before.items():
        after, holders = replica_rows(catalog, table, day)  # the clones hold the same rows as the rest
        assert after == rows and be4.id in holders

    # verify (operator): every replica, the clones on be4 included, re-hashed and row-checked: none bad
    with step("verify", took):
        verified = ColocateVerifyOperator(task_id="verify", conf=CONF).execute(context={})
    replicas = sum(len(b) for t, d in before for b in catalog.reads.replicas(t, [d])[1][0].buckets)
    assert verified["bad"] == [] and verified["replicas"] == replicas == 3 * 4 * 2
    assert verified["rows"] == 2 * (1200 + 6500)  # both replicas of every bucket
    assert all(g["stable"] for g in verified["groups"])

    # every one of them ran on the cluster, whose workers have no airflow_colocate
    names = [a["name"] for a in cluster.state()["completedapps"]]
    for prefix in ("colocate-write", "colocate-import", "colocate-join", "colocate-balance", "colocate-verify"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    assert backends  # three backends to start with
