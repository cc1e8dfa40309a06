"""Issue 42, done when: one entry per supported Spark line. A standalone cluster (a master and two
one-core workers) started from that line's own pyspark in a virtualenv of its own, whose workers
hold only pyspark, pyarrow and pandas; a DAG run from the Airflow side (this process, pyspark 4.2)
writes two tables, joins them colocated (the columnar merge join and the ordered read where the line
has them), loses a backend and repairs it, and verifies. The cluster's line is learned from its
``spark-submit --version`` (no ``spark_version`` extra on the connection); every bucket of every row
is plain Spark's bucket id on that line, and the join equals plain Spark's join on that line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.spark_lines import COLUMNAR, LINES, ORDERED
from airflow_colocate.spark.locality import local_line
from colocate_testing import add_local_backends
from line_testing import driver_env, home_of, lines_under_test, plain_spark, venv_of
from sparkcluster import start_cluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

DAY = "2026-11-01"
ORDERS = "o_orderkey bigint, o_custkey bigint, o_totalprice decimal(15,2), o_status string, dt date"
LINEITEM = "l_orderkey bigint, l_price bigint, l_flag string, dt date"
QUERY = ("SELECT o.o_orderkey, o.o_custkey, o.o_status, l.l_price, l.l_flag FROM orders o JOIN lineitem l "
         "ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey")
PLAIN_QUERY = ("SELECT o.o_orderkey, o.o_custkey, o.o_status, l.l_price, l.l_flag FROM orders o JOIN lineitem l "
               "ON o.o_orderkey = l.l_orderkey")
CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}
# line -> the lake its matrix entry left (catalog URL, plain Spark's join rows): the cross-line test reads them
LAKES: dict[str, dict] = {}


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


@pytest.fixture(scope="module", params=lines_under_test())
def line_cluster(request, tmp_path_factory):
    """(line, its virtualenv, its cluster): one cluster per line, shared by the module's tests."""
    line = request.param
    venv = venv_of(line)
    cluster = start_cluster(tmp_path_factory.mktemp(f"spark-{line}"), workers=2, python=venv / "bin" / "python",
                            spark_home=home_of(venv))
    yield line, venv, cluster
    cluster.stop()
    assert cluster.leftover_pids() == [], "Spark cluster processes survived stop()"


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
        copies = [sorted(tuple(r.values()) for f in sorted(Path(rep.path.removeprefix("file://")).glob("*.parquet"))
                         for r in pq.read_table(f).to_pylist()) for rep in bucket]
        assert copies and all(c == copies[0] for c in copies), f"the replicas of bucket {seq} of {table} differ"
        out[seq] = copies[0]
    return out


def test_doctor_names_the_line_its_jar_and_the_executors_python(line_cluster, tmp_path):
    """``colocate doctor --master`` on a cluster of another line than this side's pyspark: the line
    from that line's spark-submit on PATH, the jar a job would ship there, and what its executors
    run (asked through that spark-submit). One line (3.5, the other Scala) is enough: the same code
    serves every line."""
    line, venv, cluster = line_cluster
    if line != "3.5":
        pytest.skip("doctor's cross-line probe is checked on 3.5")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "COLOCATE_CATALOG_URL")}
    env.update(driver_env(venv, tmp_path / "home"))
    done = subprocess.run([sys.executable, "-c", "import sys; from airflow_colocate.cli import main; sys.exit(main())",
                           "--catalog", f"sqlite:///{tmp_path / 'none.db'}", "doctor", "--master", cluster.master_url,
                           "--json"], capture_output=True, text=True, env=env, timeout=300)
    report = json.loads(done.stdout)
    assert report["line"]["line"] == "3.5" and report["line"]["scala"] == "2.12", report["line"]
    assert report["line"]["jar"].endswith("colocate-locality-spark3.5_2.12.jar")
    assert report["line"]["without"] == ["ordered read", "columnar merge join"]
    pythons = {e["python"] for e in report["executor"]["executors"]}
    assert pythons == {".".join(map(str, sys.version_info[:3]))}, report["executor"]  # the workers' venv's
    assert not [p for p in report["problems"] if "Spark" in p or "executor" in p], report["problems"]


def test_a_dag_writes_joins_repairs_and_verifies_on_the_line(line_cluster, airflow_db, tmp_path, monkeypatch):
    line, venv, cluster = line_cluster
    env = driver_env(venv, tmp_path / "home")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    master = urlparse(cluster.master_url)
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "0")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": f"spark://{master.hostname}", "port": master.port}))
    catalog = Catalog(url, actor="pytest")
    catalog.init()
    try:
        add_local_backends(catalog, tmp_path / "backends")
        src = sources(tmp_path / "src")
        started = time.monotonic()
        run = line_dag(src, tmp_path / "joined", line, tmp_path / "dags").test(logical_date=pendulum.datetime(2026, 11, 2, tz="UTC"))
        took = time.monotonic() - started
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert run.state == "success", (states, cluster.logs())
        print(f"Spark {line}: the DAG took {took:.0f} s")

        # every job ran on this line's cluster, with this line's jar
        names = [a["name"] for a in cluster.state()["completedapps"]]
        for prefix in ("colocate-write", "colocate-join", "colocate-clone", "colocate-verify"):
            assert any(n.startswith(prefix) for n in names), (prefix, names)
        assert json.loads((tmp_path / "home" / "cache" / "spark-versions.json").read_text()), "the line was not learned"

        # bucket ids are Spark's on this line, and the replicas hold the source rows
        plain = plain_spark(venv, src, 4, PLAIN_QUERY)
        assert plain["version"].startswith(line + ".")
        for table in ("orders", "lineitem"):
            got = bucket_rows(catalog, table)
            want = {}
            for key, bucket in plain["buckets"][table]:
                want.setdefault(bucket, []).append(key)
            assert {b: sorted(r[0] for r in rows) for b, rows in got.items() if rows} == \
                {b: sorted(keys) for b, keys in want.items()}
            source = pq.read_table(src[table][0]).to_pylist()
            assert sorted(r for rows in got.values() for r in rows) == sorted(tuple(r.values()) for r in source)

        # the join: colocated, the line's features in its plan, plain Spark's rows
        joined = sorted(tuple(r.values()) for f in sorted((tmp_path / "joined").rglob("*.parquet"))
                        for r in pq.read_table(f).to_pylist())
        assert len(joined) > 1000 and joined == sorted(tuple(r) for r in plain["join"])
        reports = [json.loads(p.read_text()) for p in (tmp_path / "home" / "runs").glob("*/report.json")]
        join_report = next(r for r in reports if r.get("kind") == "join")
        assert "colocate: true" in join_report["explain"] and "colocate: false" not in join_report["explain"]
        plan, explain = join_report["physical_plan"], join_report["explain"]
        assert "Exchange hashpartitioning" not in plan, plan
        if ORDERED in LINES[line].features:  # read in key order, merged on column batches
            assert "bucket reads: 2 in key order (no sort, order checked per row), 0 sorted by Spark" in explain, explain
            assert "1 merge join(s) on column batches (ColocateColumnarMergeJoin)" in explain, explain
        else:  # 3.5: each bucket sorted as plain Spark does, no extension in the plan
            assert "bucket reads: 0 in key order (no sort, order checked per row), 2 sorted by Spark" in explain, explain
            assert "ColocateOrderedBucket" not in plan and "ColocateColumnarMergeJoin" not in plan

        # the lost backend was repaired, and verify found every replica good
        group = catalog.groups.get("g")
        be2 = catalog.backends.get("be2").id
        assert group.stable and be2 not in {b for row in group.bucket_map for b in row}
        verify = next(r for r in reports if r.get("kind") == "verify")
        assert verify.get("bad", []) == [], verify
        LAKES[line] = {"url": url, "plain": sorted(tuple(r) for r in plain["join"]), "tmp": tmp_path}
    finally:
        catalog.dispose()


CROSS = [("3.5", "4.3"), ("3.5", "4.2"), ("4.3", "3.5")]  # (written on, read and joined on)


def test_a_lake_written_on_one_line_is_read_and_verified_on_another(airflow_db, tmp_path, monkeypatch):
    """Bucket ids are Spark's on every line: the lake the 3.5 entry wrote (and repaired) is joined
    colocated and verified by 4.3 and by 4.2 (this side's own pyspark), and the 4.3 entry's by 3.5,
    each through that line's own spark-submit on a local master; every join equals plain Spark's."""
    from airflow_colocate.operators.join import ColocateJoinOperator
    from airflow_colocate.operators.verify import ColocateVerifyOperator

    pairs = [(w, r) for w, r in CROSS if w in LAKES and r in lines_under_test()]
    if not pairs:
        pytest.skip(f"no lake of {', '.join(sorted({w for w, _ in CROSS}))} was written in this run")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.delenv("SPARK_HOME", raising=False)
    path = os.environ.get("PATH", "")
    for i, (written, read) in enumerate(pairs):
        lake = LAKES[written]
        venv = venv_of(read)
        for key, value in driver_env(venv, tmp_path / f"home-{i}").items():
            monkeypatch.setenv(key, value)
        if read == local_line():  # the Airflow side's own pyspark, as a plain install submits
            monkeypatch.setenv("PATH", path)
            for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
                monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("COLOCATE_CATALOG_URL", lake["url"])
        out = tmp_path / f"joined-{written}-on-{read}"
        joined = ColocateJoinOperator(task_id=f"join_{i}", conf=CONF, require_colocate=True, output_path=out.as_uri(),
                                      tables={"orders": [DAY], "lineitem": [DAY]}, query=QUERY).execute(context={})
        assert joined["colocate"] is True, (written, read, joined["explain"])
        rows = sorted(tuple(r.values()) for f in sorted(out.rglob("*.parquet")) for r in pq.read_table(f).to_pylist())
        assert rows == lake["plain"], f"written on {written}, joined on {read}: not plain Spark's rows"
        if read != local_line():
            verified = ColocateVerifyOperator(task_id=f"verify_{i}", conf=CONF).execute(context={})
            assert verified["bad"] == [] and verified["replicas"] == 16, (written, read, verified)
