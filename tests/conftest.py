"""Shared fixtures: a fresh catalog on SQLite and on a real PostgreSQL server, local backends."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

# Airflow reads its configuration at import: point it at a throwaway home before anything imports
# it, so tests never touch a developer's ~/airflow.
REPO = Path(__file__).resolve().parent.parent
os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="colocate-airflow-")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The suite starts dozens of driver JVMs (every spark-submit, the shared session, the Connect
# server), each seconds long and mostly class loading: C1 alone and the serial collector cut their
# CPU by about a fifth on two cores, which two test workers share. A caller's own setting wins.
from sparkcluster import SHORT_JVM  # noqa: E402

os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_JVM)

import airflow  # noqa: E402,F401  (configures Airflow's logging now, not inside a test that captures stderr)
import pytest

from airflow_colocate.catalog import Catalog
from colocate_testing import add_local_backends
from pgserver import fresh_pg_database


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory):
    """A PostgreSQL server for the whole run: $COLOCATE_TEST_PG_URL, or one started from the
    Debian binaries. In CI a missing server fails the run instead of skipping tests silently."""
    url = os.environ.get("COLOCATE_TEST_PG_URL")
    if url:
        yield url
        return
    from pgserver import find_pg_bin, start_postgres

    if find_pg_bin() is None:
        message = "PostgreSQL server binaries not found: 'apt-get install postgresql' (or set COLOCATE_TEST_PG_URL)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = start_postgres(tmp_path_factory.mktemp("pg"))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return fresh_pg_database(request.getfixturevalue("pg_server_url"))


@pytest.fixture
def catalog(catalog_url) -> Catalog:
    cat = Catalog(catalog_url, actor="pytest")
    cat.init()
    yield cat
    cat.dispose()


@pytest.fixture
def sqlite_catalog(tmp_path) -> Catalog:
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest")
    cat.init()
    yield cat
    cat.dispose()


@pytest.fixture
def backends(catalog, tmp_path):
    return add_local_backends(catalog, tmp_path / "backends")


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run (master local[2], UI off, 4 shuffle partitions)."""
    from airflow_colocate.spark.session import get_spark

    session = get_spark("colocate-tests", master="local[2]", conf={
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.sql.autoBroadcastJoinThreshold": "-1",  # shuffle joins in fallbacks, so Exchange counts are exact
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown chatter hits closed streams


@pytest.fixture(scope="session")
def colocate_wheel(tmp_path_factory) -> Path:
    """This checkout's wheel, built once per session through its sdist (tests/wheel_testing.py)."""
    from wheel_testing import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))[1]


@pytest.fixture(scope="session")
def wheel_venv(colocate_wheel, tmp_path_factory):
    """A fresh virtualenv outside the checkout with only the wheel and its pinned dependencies
    (``wheel_testing.Venv``: its python, its ``colocate`` and an environment that hides the checkout)."""
    from wheel_testing import install

    return install(colocate_wheel, tmp_path_factory.mktemp("wheel-venv") / "venv")


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata database (SQLite under the test AIRFLOW_HOME), for dag.test()."""
    from airflow.utils import db

    db.resetdb(skip_init=False)


# The longest test files (seconds on the idle 2-core machine, two workers), started first so the
# two workers finish together instead of one running a 4-minute file alone at the end.
LONGEST_FIRST = [
    "tests/spark_lines/test_line_matrix.py",  # 3.5 and 4.3: a cluster and a DAG each, then the cross-line joins
    "tests/spark_lines/test_line_matrix_4_0.py",  # a cluster and a DAG of the line
    "tests/spark_lines/test_line_matrix_4_1.py",
    "tests/spark_lines/test_line_matrix_4_2.py",
    "tests/dags/test_dags.py",  # ~190-300 s: the daily DAG twice through spark-submit
    "tests/dags/test_daily_dag_on_cluster.py",  # ~170-280 s
    "tests/balance/test_local_reads.py",  # ~150-200 s
    "tests/spark/test_cluster_without_package.py",  # ~170 s: a cluster whose workers lack the package
    "tests/joins/test_read_failover.py",  # ~150 s: a small lake per fault
    "tests/nemesis/test_nemesis.py",  # ~150 s: five short schedules of work and faults
    "tests/joins/test_schema_evolution.py",  # ~140 s
    "tests/joins/test_columnar_join_property.py",  # seven key types, two random lakes each, ten queries a lake
    "tests/joins/test_columnar_join_corpus.py",  # the 44 corpus shapes with the columnar join forced on
    "tests/plugins/test_browser.py",
    "tests/balance/test_maintenance_dag.py",
    "tests/balance/test_maintenance_outcomes.py",  # ~150 s under load: three dag.test runs, one spark-submit clone
    "tests/operators/test_join_operator.py",
    "tests/joins/test_spark_connect.py",  # a Spark Connect server (~20 s to start)
    "tests/spark/test_netns_cluster.py",  # ~70 s: a two-host cluster in network namespaces, two joins
    "tests/faults/test_link_down.py",  # ~90 s: the same cluster, a worker's link down mid-query
    "tests/operators/test_task_log.py",
    "tests/test_compose_services.py",
    "tests/test_wheel.py",  # builds and installs the wheel
    "tests/operators/test_write_operator.py",
]


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order
