"""The example DAGs: they import cleanly, and the daily pipeline runs end to end with dag.test()
(real Spark through spark-submit, real catalog), one run per logical date."""

from __future__ import annotations

import json

import pendulum
import pytest

from colocate_testing import add_local_backends
from daily_pipeline import DAGS, check_day, load_dag, task_xcom
from airflow_colocate.catalog import Catalog

DATES = [pendulum.datetime(2026, 11, 1, tz="UTC"), pendulum.datetime(2026, 11, 2, tz="UTC")]


def test_every_dag_imports_without_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert {"colocate_tpch_daily", "colocate_maintenance"} <= set(bag.dag_ids)
    for dag in bag.dags.values():
        assert dag.tags and "colocate" in dag.tags


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


@pytest.mark.spark
def test_daily_dag_backfills_two_dates_end_to_end(pipeline_env, spark):
    """A backfill over two dates, as `airflow backfill create` runs each date (every spark-submit
    here costs ~15 s, so two runs; a re-run of a date replacing its version is the write
    operator's overwrite, tests/operators/test_write_operator.py)."""
    catalog, tmp = pipeline_env
    dag = load_dag("colocate_tpch_daily")
    started = pendulum.now("UTC")
    runs = list(DATES)
    for date in runs:
        run = dag.test(logical_date=date)
        assert run.state == "success", f"{date}: {run.state}"
        join = task_xcom(run, "revenue_by_priority")
        assert join["colocate"] is True and "colocate: true" in join["explain"], join["explain"]
        group = catalog.groups.get("g_tpch").group_id  # the task's "Colocation" button opens its group
        for task_id in ("load_orders", "revenue_by_priority"):
            assert task_xcom(run, task_id, key="_link_ColocationLink") == f"/plugin/colocation/api/colocate/ui?group={group}"

    for date in DATES:
        ds = date.to_date_string()
        check_day(catalog, spark, tmp / "landing" / ds, ds)
    assert all(g.stable for g in catalog.groups.list())
    # each committed write (and join output) is an Asset event a downstream DAG can be scheduled on
    for table in ("orders", "lineitem", "revenue_by_priority"):  # writes, and the join into its output table
        extras = asset_event_extras(f"colocate://default/{table}", since=started)
        assert [e["partition"] for e in extras] == [d.to_date_string() for d in runs], table
        assert all(e["rows"] > 0 for e in extras)


def asset_event_extras(uri: str, since) -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = (select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                 .where(AssetModel.uri == uri, AssetEvent.timestamp >= since).order_by(AssetEvent.timestamp))
        return list(session.scalars(query))
