"""A Spark line's matrix entry (a helper, not a test file; the test files are test_line_matrix*.py).

What an entry does: a standalone cluster (a master and two one-core workers) started from that
line's own pyspark in a virtualenv of its own, whose workers hold only pyspark, pyarrow and pandas;
a DAG run from the Airflow side (this process, pyspark 4.2) writes two tables, joins them colocated
(the columnar merge join and the ordered read where the line has them), loses a backend and repairs
it, and verifies. The cluster's line is learned from its ``spark-submit --version`` (no
``spark_version`` extra on the connection); every bucket of every row is plain Spark's bucket id on
that line, and the join equals plain Spark's join on that line.

Why an entry is run once and then only read (:func:`run_entry`, :class:`Entry`): its DAG is the
expensive part (five Spark applications, each a driver and two executors), and more than one test
reads what it left: its own checks, ``colocate doctor`` against its cluster (3.5), and the
cross-line joins over its lake. The cluster lives only while the entry runs, so no two lines'
daemons hold memory at once, and plain Spark's answers are computed beside the DAG, since they
need only the sources.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.spark_lines import COLUMNAR, LINES, ORDERED
from airflow_colocate.jobs.backends import add_backend
from airflow_colocate.spark.locality import local_line
from airflow_colocate.storage import fs
from colocate_testing import add_local_backends
from line_testing import driver_env, home_of, lines_under_test, plain_spark_result, plain_spark_start, venv_of
from sparkcluster import start_cluster

DAY = "2026-11-01"
ORDERS = "o_orderkey bigint, o_custkey bigint, o_totalprice decimal(15,2), o_status string, dt date"
LINEITEM = "l_orderkey bigint, l_price bigint, l_flag string, dt date"
QUERY = ("SELECT o.o_orderkey, o.o_custkey, o.o_status, l.l_price, l.l_flag FROM orders o JOIN lineitem l "
         "ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey")
PLAIN_QUERY = ("SELECT o.o_orderkey, o.o_custkey, o.o_status, l.l_price, l.l_flag FROM orders o JOIN lineitem l "
               "ON o.o_orderkey = l.l_orderkey")
# The backends' hosts (be1..be3, each its own failure domain) name no Spark worker: a join that
# waited for executors there (spark.colocate.locality.executorWaitSeconds, 15 s) would only idle.
CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
        "spark.colocate.locality.executorWaitSeconds": "0"}


def sources(root: Path) -> dict[str, tuple[str, str]]:
    """orders (600 keys) and lineitem (3 lines an order, some matching no order), as parquet."""
    keys = list(range(600))
    (root / "orders").mkdir(parents=True)
    (root / "lineitem").mkdir(parents=True)
    pq.write_table(pa.table({
        "o_orderkey": pa.array(keys, pa.int64()),
        "o_custkey": pa.array([k % 89 for k in keys], pa.int64()),
        "o_totalprice": pa.array([Decimal(k % 1000) / 4 for k in keys], pa.decimal128(15, 2)),
        "o_status": pa.array([None if k % 11 == 0 else "OFP"[k % 3] for k in keys], pa.string()),
    }), root / "orders" / "part-0.parquet")
    n = 1900
    pq.write_table(pa.table({
        "l_orderkey": pa.array([k // 3 + 7 for k in range(n)], pa.int64()),
        "l_price": pa.array(range(n), pa.int64()),
        "l_flag": pa.array(["RAN"[k % 3] for k in range(n)], pa.string()),
    }), root / "lineitem" / "part-0.parquet")
    return {"orders": (str(root / "orders"), "o_orderkey"), "lineitem": (str(root / "lineitem"), "l_orderkey")}


DAG_FILE = """
from __future__ import annotations
import pendulum
from airflow.sdk import DAG, task
from airflow_colocate.hooks.catalog import ColocateCatalogHook
from airflow_colocate.operators.balance import ColocateBalanceOperator
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.verify import ColocateVerifyOperator
from airflow_colocate.operators.write import ColocateWriteOperator

ARGS = {args!r}
with DAG(ARGS["dag_id"], schedule=None, start_date=pendulum.datetime(2026, 11, 1), catchup=False) as dag:
    common = dict(bucket_num=4, replication_num=2, partition_col="dt", colocate_with="g", conf=ARGS["conf"],
                  partition=ARGS["day"])
    orders = ColocateWriteOperator(task_id="load_orders", table="orders", source=ARGS["orders"],
                                   columns=ARGS["orders_cols"], dist_cols=["o_orderkey"], **common)
    lines = ColocateWriteOperator(task_id="load_lineitem", table="lineitem", source=ARGS["lineitem"],
                                  columns=ARGS["lineitem_cols"], dist_cols=["l_orderkey"], **common)
    join = ColocateJoinOperator(task_id="join", conf=ARGS["join_conf"], require_colocate=True,
                                output_path=ARGS["out"], tables={{"orders": [ARGS["day"]], "lineitem": [ARGS["day"]]}},
                                query=ARGS["query"])

    @task
    def lose_backend() -> None:
        ColocateCatalogHook().get_conn().backends.set_state("be2", "down", reason="disk failed")

    repair = ColocateBalanceOperator(task_id="repair", relocate_now=True, threshold=1.0, conf=ARGS["conf"])
    verify = ColocateVerifyOperator(task_id="verify", conf=ARGS["conf"])
    orders >> lines >> join >> lose_backend() >> repair >> verify
"""


def line_dag(src: dict[str, tuple[str, str]], out: Path, line: str, folder: Path):
    """The DAG, parsed from a file of its own and stored (``dag.test`` runs a DAG Airflow stored)."""
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    join_conf = {**CONF, "spark.colocate.join.columnar": "true"} if COLUMNAR in LINES[line].features else CONF
    dag_id = f"colocate_spark_{line.replace('.', '_')}"
    args = {"dag_id": dag_id, "conf": CONF, "join_conf": join_conf, "day": DAY, "orders": src["orders"][0],
            "lineitem": src["lineitem"][0], "orders_cols": ORDERS, "lineitem_cols": LINEITEM, "out": out.as_uri(),
            "query": QUERY}
    folder.mkdir(parents=True)
    (folder / f"{dag_id}.py").write_text(DAG_FILE.format(args=args))
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}, bag.import_errors
    from airflow.dag_processing.bundles.manager import DagBundlesManager

    DagBundlesManager().sync_bundles_to_db()
    sync_bag_to_db(bag, "dags-folder", None)  # stored, as the DAG processor would
    return bag.get_dag(dag_id)


def bucket_rows(catalog, table: str) -> dict[int, list[tuple]]:
    """bucket seq -> the rows of its replicas (every replica of a bucket must hold the same)."""
    _, parts = catalog.reads.replicas(table, [DAY])
    out = {}
    for seq, bucket in enumerate(parts[0].buckets):
        copies = [sorted(tuple(r.values()) for name in sorted(n for n, _ in fs.list_files(rep.path) if n.endswith(".parquet"))
                         for r in pq.read_table(fs.open_read(fs.join(rep.path, name))).to_pylist()) for rep in bucket]
        assert copies and all(c == copies[0] for c in copies), f"the replicas of bucket {seq} of {table} differ"
        out[seq] = copies[0]
    return out


# Which test file runs which lines' entries. Why several files: pytest-xdist's --dist loadfile (make
# test) keeps a file on one worker, and five entries in one file ran one after another (~24 min);
# spread over files the two workers share them. 3.5 and 4.3 stay together because the cross-line
# test reads both their lakes, which a file's entries leave only to that file's tests.
MATRIX_FILES = {"test_line_matrix.py": ("3.5", "4.3"), "test_line_matrix_4_0.py": ("4.0",),
                "test_line_matrix_4_1.py": ("4.1",), "test_line_matrix_4_2.py": ("4.2",)}
DOCTOR_LINE = "3.5"  # the other Scala: doctor's cross-line probe is checked there
# Lines whose entry keeps its backends in a bucket of the tests' S3 API (tests/s3server.py) instead
# of local folders: the job ships that line's own Hadoop's hadoop-aws (3.5: Hadoop 3.3.4 with the
# AWS SDK v1, spark/object_stores.py), and the cross-line test reads that lake from 4.3 and 4.2
# (Hadoop 3.5.0, SDK v2). 4.2's own S3 tests are tests/object_stores.
S3_LINES = ("3.5",)


def lines_of(test_file: str) -> list[str]:
    """The lines this test file runs, of those under test (``$COLOCATE_TEST_SPARK_LINES``)."""
    wanted = lines_under_test()
    return [line for line in MATRIX_FILES[Path(test_file).name] if line in wanted]


@dataclass
class Entry:
    """What a line's entry left for the tests to check: the DAG's outcome, its cluster's
    applications, plain Spark's answers on the line, the lake (catalog, replicas, join output)."""

    line: str
    venv: Path
    tmp: Path  # catalog.db, backends/, src/, joined/, home/ (the jobs' plans and reports)
    url: str
    run_state: str = ""
    states: dict[str, str] = field(default_factory=dict)
    apps: list[str] = field(default_factory=list)
    cluster_logs: str = ""
    plain: dict = field(default_factory=dict)
    doctor: subprocess.CompletedProcess | None = None
    leftover: list[int] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    s3: object = None  # the S3 server its backends are on (S3_LINES), else None: local folders

    def store_env(self) -> dict[str, str]:
        """What reaching its backends takes: the S3 server's ``AWS_*`` variables, or nothing."""
        return self.s3.env() if self.s3 is not None else {}

    def plain_join(self) -> list[tuple]:
        return sorted(tuple(r) for r in self.plain["join"])


def run_entry(line: str, tmp: Path, *, doctor: bool = False, s3=None) -> Entry:
    """Start the line's cluster, run the DAG on it (and ``colocate doctor`` against it when asked),
    stop the cluster; plain Spark runs on the line's local session meanwhile. ``s3``: an S3 server
    to keep the backends on (a bucket of their own)."""
    venv = venv_of(line)
    entry = Entry(line, venv, tmp, f"sqlite:///{tmp / 'catalog.db'}", s3=s3)
    began = time.monotonic()
    src = sources(tmp / "src")
    plain = plain_spark_start(venv, src, 4, PLAIN_QUERY)
    try:
        cluster = start_cluster(tmp / "cluster", workers=2, python=venv / "bin" / "python", spark_home=home_of(venv))
        entry.seconds["cluster start"] = time.monotonic() - began
        try:
            with pytest.MonkeyPatch.context() as patch:
                run_dag(entry, src, cluster.master_url, patch)
            entry.apps = [a["name"] for a in cluster.state()["completedapps"]]
            if entry.run_state != "success":
                entry.cluster_logs = cluster.logs()
            if doctor:
                entry.doctor = doctor_json(venv, cluster.master_url, tmp / "doctor")
        finally:
            cluster.stop()
            entry.leftover = cluster.leftover_pids()
        waited = time.monotonic()
        entry.plain = plain_spark_result(plain)
        entry.seconds["waiting for plain Spark"] = time.monotonic() - waited
    finally:
        if plain.poll() is None:
            plain.kill()
            plain.wait()
    entry.seconds["entry"] = time.monotonic() - began
    print(f"Spark {line}: " + ", ".join(f"{k} {v:.0f} s" for k, v in entry.seconds.items()))
    return entry


def run_dag(entry: Entry, src: dict[str, tuple[str, str]], master_url: str, patch: pytest.MonkeyPatch) -> None:
    """The DAG from the Airflow side, submitting to the cluster through the line's spark-submit."""
    for key, value in driver_env(entry.venv, entry.tmp / "home").items():
        patch.setenv(key, value)
    patch.delenv("SPARK_HOME", raising=False)
    master = urlparse(master_url)
    patch.setenv("COLOCATE_CATALOG_URL", entry.url)
    patch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "0")
    patch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": f"spark://{master.hostname}", "port": master.port}))
    for key, value in entry.store_env().items():
        patch.setenv(key, value)
    catalog = Catalog(entry.url, actor="pytest")
    catalog.init()
    try:
        if entry.s3 is None:
            add_local_backends(catalog, entry.tmp / "backends")
        else:  # as a user adds them: the bucket exists, each backend gets its identity marker
            bucket = entry.s3.make_bucket(f"line-{entry.line.replace('.', '-')}-{os.getpid()}")
            for i in (1, 2, 3):
                add_backend(catalog, f"s3a://{bucket}/be{i}", name=f"be{i}")
    finally:
        catalog.dispose()
    started = time.monotonic()
    dag = line_dag(src, entry.tmp / "joined", entry.line, entry.tmp / "dags")
    run = dag.test(logical_date=pendulum.datetime(2026, 11, 2, tz="UTC"))
    entry.seconds["DAG"] = time.monotonic() - started
    entry.run_state = run.state
    tis = run.get_task_instances()
    entry.states = {ti.task_id: ti.state for ti in tis}
    for ti in tis:
        if ti.start_date and ti.end_date:
            entry.seconds[f"  {ti.task_id}"] = (ti.end_date - ti.start_date).total_seconds()


def doctor_json(venv: Path, master_url: str, folder: Path) -> subprocess.CompletedProcess:
    """``colocate doctor --master --json`` from the Airflow side, the line's spark-submit on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "COLOCATE_CATALOG_URL")}
    env.update(driver_env(venv, folder / "home"))
    return subprocess.run([sys.executable, "-c", "import sys; from airflow_colocate.cli import main; sys.exit(main())",
                           "--catalog", f"sqlite:///{folder / 'none.db'}", "doctor", "--master", master_url,
                           "--json"], capture_output=True, text=True, env=env, timeout=300)


def check_doctor(entry: Entry) -> None:
    """The line from that line's spark-submit on PATH, the jar a job would ship there, and what its
    executors run (asked through that spark-submit)."""
    done = entry.doctor
    assert done is not None, f"doctor was not run against the {entry.line} cluster"
    report = json.loads(done.stdout)
    assert report["line"]["line"] == "3.5" and report["line"]["scala"] == "2.12", report["line"]
    assert report["line"]["jar"].endswith("colocate-locality-spark3.5_2.12.jar")
    assert report["line"]["without"] == ["ordered read", "columnar merge join"]
    pythons = {e["python"] for e in report["executor"]["executors"]}
    assert pythons == {".".join(map(str, sys.version_info[:3]))}, report["executor"]  # the workers' venv's
    assert not [p for p in report["problems"] if "Spark" in p or "executor" in p], report["problems"]


def check_entry(entry: Entry) -> None:
    """Everything the entry claims: the DAG ran on this line's cluster, with this line's jar, wrote
    Spark's buckets of this line, joined colocated as plain Spark joins, repaired and verified."""
    line, tmp = entry.line, entry.tmp
    assert entry.run_state == "success", (entry.states, entry.cluster_logs)
    assert entry.leftover == [], "Spark cluster processes survived stop()"
    for prefix in ("colocate-write", "colocate-join", "colocate-clone", "colocate-verify"):
        assert any(n.startswith(prefix) for n in entry.apps), (prefix, entry.apps)
    assert json.loads((tmp / "home" / "cache" / "spark-versions.json").read_text()), "the line was not learned"
    assert entry.plain["version"].startswith(line + ".")
    catalog = Catalog(entry.url, actor="pytest")
    try:
        with pytest.MonkeyPatch.context() as patch:
            for key, value in entry.store_env().items():
                patch.setenv(key, value)
            check_buckets(entry, catalog)
        if entry.s3 is not None:
            assert {urlparse(b.root_uri).scheme for b in catalog.backends.list()} == {"s3a"}
        group = catalog.groups.get("g")  # the lost backend was repaired
        be2 = catalog.backends.get("be2").id
        assert group.stable and be2 not in {b for row in group.bucket_map for b in row}
    finally:
        catalog.dispose()
    joined = sorted(tuple(r.values()) for f in sorted((tmp / "joined").rglob("*.parquet"))
                    for r in pq.read_table(f).to_pylist())
    assert len(joined) > 1000 and joined == entry.plain_join()
    reports = [json.loads(p.read_text()) for p in (tmp / "home" / "runs").glob("*/report.json")]
    check_join_plan(line, next(r for r in reports if r.get("kind") == "join"))
    verify = next(r for r in reports if r.get("kind") == "verify")
    assert verify.get("bad", []) == [], verify


def check_buckets(entry: Entry, catalog: Catalog) -> None:
    """Bucket ids are Spark's on this line, and the replicas hold the source rows."""
    for table in ("orders", "lineitem"):
        got = bucket_rows(catalog, table)
        want = {}
        for key, bucket in entry.plain["buckets"][table]:
            want.setdefault(bucket, []).append(key)
        assert {b: sorted(r[0] for r in rows) for b, rows in got.items() if rows} == \
            {b: sorted(keys) for b, keys in want.items()}
        source = pq.read_table(entry.tmp / "src" / table).to_pylist()
        assert sorted(r for rows in got.values() for r in rows) == sorted(tuple(r.values()) for r in source)


def check_join_plan(line: str, join_report: dict) -> None:
    """Colocated, with the line's features in its plan."""
    assert "colocate: true" in join_report["explain"] and "colocate: false" not in join_report["explain"]
    plan, explain = join_report["physical_plan"], join_report["explain"]
    assert "Exchange hashpartitioning" not in plan, plan
    if ORDERED in LINES[line].features:  # read in key order, merged on column batches
        assert "bucket reads: 2 in key order (no sort, order checked per row), 0 sorted by Spark" in explain, explain
        assert "1 merge join(s) on column batches (ColocateColumnarMergeJoin)" in explain, explain
    else:  # 3.5: each bucket sorted as plain Spark does, no extension in the plan
        assert "bucket reads: 0 in key order (no sort, order checked per row), 2 sorted by Spark" in explain, explain
        assert "ColocateOrderedBucket" not in plan and "ColocateColumnarMergeJoin" not in plan


CROSS = [("3.5", "4.3"), ("3.5", "4.2"), ("4.3", "3.5")]  # (written on, read and joined on)


def check_cross(line_entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each lake of CROSS joined colocated (and verified, off this side's own pyspark) by the other
    line through that line's own spark-submit on a local master; every join is plain Spark's."""
    from airflow_colocate.operators.join import ColocateJoinOperator
    from airflow_colocate.operators.verify import ColocateVerifyOperator

    pairs = [(w, r) for w, r in CROSS if w in lines_under_test() and r in lines_under_test()]
    if not pairs:
        pytest.skip(f"the lines under test ({', '.join(lines_under_test())}) make no pair of {CROSS}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.delenv("SPARK_HOME", raising=False)
    path = os.environ.get("PATH", "")
    for i, (written, read) in enumerate(pairs):
        lake = line_entry(written)
        venv = venv_of(read)
        for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
            monkeypatch.delenv(key, raising=False)
        for key, value in lake.store_env().items():  # a lake on S3: this line ships its own hadoop-aws
            monkeypatch.setenv(key, value)
        for key, value in driver_env(venv, tmp_path / f"home-{i}").items():
            monkeypatch.setenv(key, value)
        if read == local_line():  # the Airflow side's own pyspark, as a plain install submits
            monkeypatch.setenv("PATH", path)
            for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
                monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("COLOCATE_CATALOG_URL", lake.url)
        out = tmp_path / f"joined-{written}-on-{read}"
        joined = ColocateJoinOperator(task_id=f"join_{i}", conf=CONF, require_colocate=True, output_path=out.as_uri(),
                                      tables={"orders": [DAY], "lineitem": [DAY]}, query=QUERY).execute(context={})
        assert joined["colocate"] is True, (written, read, joined["explain"])
        rows = sorted(tuple(r.values()) for f in sorted(out.rglob("*.parquet")) for r in pq.read_table(f).to_pylist())
        assert rows == lake.plain_join(), f"written on {written}, joined on {read}: not plain Spark's rows"
        if read != local_line():
            verified = ColocateVerifyOperator(task_id=f"verify_{i}", conf=CONF).execute(context={})
            assert verified["bad"] == [] and verified["replicas"] == 16, (written, read, verified)
