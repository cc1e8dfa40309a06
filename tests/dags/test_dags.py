"""The example DAGs: they import cleanly, and the daily pipeline runs end to end with dag.test()
(real Spark through spark-submit, real catalog), idempotently per logical date."""

from __future__ import annotations

import json
from pathlib import Path

import pendulum
import pyarrow.parquet as pq
import pytest

from colocate_testing import add_local_backends
from airflow_colocate.catalog import Catalog

DAGS = Path(__file__).resolve().parents[2] / "dags"
DATES = [pendulum.datetime(2026, 11, 1, tz="UTC"), pendulum.datetime(2026, 11, 2, tz="UTC")]


def test_every_dag_imports_without_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert {"colocate_tpch_daily", "colocate_maintenance"} <= set(bag.dag_ids)
    for dag in bag.dags.values():
        assert dag.tags and "colocate" in dag.tags


@pytest.fixture(scope="module")
def airflow_db():
    from airflow.utils import db

    db.resetdb(skip_init=False)


@pytest.fixture
def pipeline_env(airflow_db, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLOCATE_LANDING", str(tmp_path / "landing"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    yield cat, tmp_path
    cat.dispose()


def load_dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS)).get_dag(dag_id)


def partition_rows(catalog, table: str, value: str) -> list[dict]:
    _, parts = catalog.read_replicas(table, [value])
    rows = []
    for bucket in parts[0].buckets:
        for f in Path(bucket[0].path.removeprefix("file://")).glob("*.parquet"):
            rows += pq.read_table(f).to_pylist()
    return rows


@pytest.mark.spark
def test_daily_dag_end_to_end_twice_per_date(pipeline_env, spark):
    catalog, tmp = pipeline_env
    dag = load_dag("colocate_tpch_daily")
    # a backfill over two dates, then the first date run again (a re-run of the backfill)
    for date in [*DATES, DATES[0]]:
        run = dag.test(logical_date=date)
        assert run.state == "success", f"{date}: {run.state}"

    for date in DATES:
        ds = date.to_date_string()
        landing = tmp / "landing" / ds
        # each partition once: as many rows as the day's landed files, not twice as many
        for table, folder in (("orders", "orders"), ("lineitem", "lineitem")):
            landed = sum(pq.read_metadata(f).num_rows for f in (landing / folder).glob("*.parquet"))
            assert sum(1 for p in catalog.partitions(table) if p.value == ds) == 1
            assert len(partition_rows(catalog, table, ds)) == landed > 0
        # the result equals a plain Spark computation over the landed files
        spark.read.parquet(str(landing / "orders")).createOrReplaceTempView("ref_o")
        spark.read.parquet(str(landing / "lineitem")).createOrReplaceTempView("ref_l")
        expected = {
            r["o_orderpriority"]: (r["order_count"], r["late_lines"], r["revenue"])
            for r in spark.sql(
                "SELECT o_orderpriority, count(DISTINCT o_orderkey) AS order_count, "
                "sum(CASE WHEN l_commitdate < l_receiptdate THEN 1 ELSE 0 END) AS late_lines, "
                "sum(l_extendedprice * (1 - l_discount)) AS revenue "
                "FROM ref_o JOIN ref_l ON o_orderkey = l_orderkey GROUP BY o_orderpriority").collect()
        }
        got = {r["o_orderpriority"]: (r["order_count"], r["late_lines"], r["revenue"])
               for r in partition_rows(catalog, "revenue_by_priority", ds)}
        assert got == expected
    assert all(g.stable for g in catalog.groups())
