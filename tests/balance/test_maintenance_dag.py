"""dags/colocate_maintenance.py end to end with dag.test(), as an operator would trigger it from
the UI form: a probe run, then a repair run after a backend went down (real clone job through
spark-submit), which leaves the group stable, off the dead backend, with every row intact; and a
verify run (real verify job through spark-submit) that finds a tampered replica, which the same
run's balance repairs."""

from __future__ import annotations

import json
from pathlib import Path

import pendulum
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs
from balance_lake import Clock, Lake, assert_whole, fingerprint, rows

pytestmark = pytest.mark.spark

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture
def lake_env(airflow_db, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "0")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    cat = Catalog(url, actor="pytest")
    cat.init()
    lake = Lake(cat, Clock(), tmp_path)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    lake.create("orders", buckets=4)
    lake.create("lineitem", buckets=4)
    lake.write("orders", "2026-11-01", range(400))
    lake.write("lineitem", "2026-11-01", range(0, 1200, 2))
    yield lake
    cat.dispose()


def test_maintenance_dag_probes_and_repairs(lake_env):
    from airflow.dag_processing.dagbag import DagBag

    cat = lake_env.catalog
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.get_dag("colocate_maintenance")
    before, sums = {t: rows(cat, t) for t in ("orders", "lineitem")}, fingerprint(cat)

    run = dag.test(logical_date=pendulum.datetime(2026, 11, 21, tz="UTC"), run_conf={"action": "probe"})
    assert run.state == "success"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "check_params": "success", "choose": "success", "probe": "success", "decommission": "skipped", "verify": "skipped",
        "balance": "skipped", "retention": "skipped", "alert": "success"}
    assert all(b.state == "alive" for b in cat.backends.list()) and cat.groups.get("g").stable

    cat.backends.set_state("be2", "down", reason="disk failed")  # held by the admin: probes keep it down
    down = cat.health.check_group("g")
    assert not down.stable and "be2" in down.reason
    run = dag.test(logical_date=pendulum.datetime(2026, 11, 22, tz="UTC"),
                   run_conf={"action": "repair", "group": "g"})
    assert run.state == "success"
    assert run.get_task_instance("balance").state == "success"
    group = cat.groups.get("g")
    assert group.stable
    assert lake_env.names["be2"] not in {be for row in group.bucket_map for be in row}
    assert_whole(cat)
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before


def test_maintenance_dag_dry_runs_change_nothing_then_decommission_drains(lake_env):
    """The UI form's other actions: balance and decommission as dry runs (the map, the backends and
    the files stay as they are), then a real decommission that drains the backend."""
    from airflow.dag_processing.dagbag import DagBag

    cat = lake_env.catalog
    dag = DagBag(dag_folder=str(DAGS)).get_dag("colocate_maintenance")
    lake_env.add_backend("be4")  # a new, empty backend: a real balance would move buckets to it
    sums = fingerprint(cat)
    snapshot = lambda: ([b.state for b in cat.backends.list()], cat.groups.get("g").bucket_map)  # noqa: E731
    before = snapshot()
    day = iter(pendulum.datetime(2026, 11, d, tz="UTC") for d in range(1, 30))

    def form(**fields):  # the UI's trigger form submits every field
        return {"action": "balance", "dry_run": False, "group": "", "backend": "", "strategy": "count", **fields}

    for conf in (form(action="balance", dry_run=True), form(action="decommission", backend="be3", dry_run=True)):
        run = dag.test(logical_date=next(day), run_conf=conf)
        assert run.state == "success", conf
        assert snapshot() == before, conf
    assert fingerprint(cat) == sums

    run = dag.test(logical_date=next(day), run_conf=form(action="decommission", backend="be3"))
    assert run.state == "success"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "check_params": "success", "choose": "success", "probe": "skipped", "decommission": "success", "verify": "skipped",
        "balance": "success", "retention": "skipped", "alert": "success"}
    assert cat.backends.get("be3").state == "decommissioning"
    group = cat.groups.get("g")
    assert group.stable and lake_env.names["be3"] not in {be for row in group.bucket_map for be in row}
    assert_whole(cat)
    assert fingerprint(cat) == sums

    run = dag.test(logical_date=next(day), run_conf=form(action="decommission"))  # no backend named
    assert run.state == "failed" and run.get_task_instance("check_params").state == "failed"  # before it starts
    assert run.get_task_instance("decommission").state == "upstream_failed"


def test_maintenance_dag_verify_marks_a_tampered_replica_bad_and_balance_repairs_it(lake_env):
    """action=verify: a replica whose bucket file was replaced by another bucket's rows (valid
    parquet) is found by the verify job, marked bad, and repaired by the balance task of the same
    run; a dry run changes nothing."""
    from airflow.dag_processing.dagbag import DagBag

    cat = lake_env.catalog
    dag = DagBag(dag_folder=str(DAGS)).get_dag("colocate_maintenance")
    before, sums = {t: rows(cat, t) for t in ("orders", "lineitem")}, fingerprint(cat)
    _, (part,) = cat.reads.replicas("orders")
    b, c = [seq for seq, replicas in enumerate(part.buckets) if replicas[0].rows][:2]
    victim, other = part.buckets[b][0].path, part.buckets[c][0].path
    (name, _), = replica_dir.replica_files(victim)
    (src, _), = replica_dir.replica_files(other)
    with open(fs.local_path(fs.join(other, src)), "rb") as f_in, open(fs.local_path(fs.join(victim, name)), "wb") as f_out:
        f_out.write(f_in.read())
    day = iter(pendulum.datetime(2026, 11, d, tz="UTC") for d in range(1, 30))

    def form(**fields):
        return {"action": "verify", "dry_run": False, "group": "", "table": "", "backend": "", "strategy": "count",
                **fields}

    run = dag.test(logical_date=next(day), run_conf=form(dry_run=True, table="orders"))
    assert run.state == "success"
    assert not [e for e in cat.events(limit=1000) if e.kind == "replica.bad"]

    run = dag.test(logical_date=next(day), run_conf=form(group="g"))
    assert run.state == "success"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "check_params": "success", "choose": "success", "probe": "skipped", "decommission": "skipped",
        "verify": "success", "balance": "success", "retention": "skipped", "alert": "success"}
    assert [e.subject for e in cat.events(limit=1000) if e.kind == "replica.bad"] == [victim]
    assert_whole(cat)  # repaired from the good replica: stable, every file hashing right
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before
