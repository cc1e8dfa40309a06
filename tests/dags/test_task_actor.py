"""The event log's "who" for a change an Airflow task made (issue 16, item 8): the catalog hook
opens the catalog as ``airflow:<dag_id>/<task_id>/<run_id>`` inside a task, so every operator and
@task that goes through it is named without passing anything. A real dag.test() run of the
maintenance DAG, no Spark (nothing to move)."""

from __future__ import annotations

import pendulum

from daily_pipeline import DAGS

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.actor import parse_task_actor
from airflow_colocate.hooks.catalog import ColocateCatalogHook, running_task_actor


def test_changes_made_by_a_task_name_its_dag_task_and_run(airflow_db, tmp_path, monkeypatch):
    """The maintenance DAG's decommission action, with only action and backend given (group and
    table left empty, None, as the trigger form sends them): the decommission event names the
    task instance, and the run (its balance step included) succeeds."""
    from airflow.dag_processing.dagbag import DagBag

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLOCATE_ACTOR", "deployment-default")  # a task still names itself
    cat = Catalog(url, actor="pytest")
    cat.init()
    for name in ("be1", "be2"):
        (tmp_path / name).mkdir()
        cat.backends.add((tmp_path / name).as_uri(), name=name)

    dag = DagBag(dag_folder=str(DAGS)).dags["colocate_maintenance"]
    run = dag.test(logical_date=pendulum.datetime(2026, 11, 23, tz="UTC"),
                   run_conf={"action": "decommission", "backend": "be2", "group": None, "table": None})
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.get_task_instance("decommission").state == "success"
    assert cat.backends.get("be2").state == "decommissioned"  # it held nothing: the same run drained it
    who = [(e.kind, e.detail.get("new"), parse_task_actor(e.actor)) for e in reversed(cat.events(limit=50))
           if e.subject == "be2" and e.kind in ("backend.decommission", "backend.state")]
    run_of = {"dag_id": "colocate_maintenance", "run_id": run.run_id}
    # the @task that started the drain, then the operator (balance) that finished it
    assert who == [("backend.decommission", None, dict(run_of, task_id="decommission")),
                   ("backend.state", "decommissioned", dict(run_of, task_id="balance"))], who
    assert running_task_actor() is None  # outside a task: the deployment's default
    assert ColocateCatalogHook().get_conn().actor == "deployment-default"
    cat.dispose()
