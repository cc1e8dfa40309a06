"""What a maintenance run tells a person (issue 30): a repair inside the relocate delay is not a
green run that did nothing (its balance task is skipped with the sentence that says when
relocation starts, also in its XCom report), ``relocate_now`` repairs at once (real clone job
through spark-submit) and is recorded with the task as the actor, and a decommission without a
backend fails in ``check_params`` with one line before anything else runs. One lake for all of it:
real files, a real catalog, real ``dag.test()`` runs."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pendulum
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs.balance_outcome import PendingRelocation, outcome_line
from balance_lake import Clock, Lake, assert_whole, fingerprint, rows

pytestmark = pytest.mark.spark

DAGS = Path(__file__).resolve().parents[2] / "dags"
WAITING = re.compile(r"nothing moved: relocation of be2's buckets starts at (?P<at>(\d{4}-\d\d-\d\d )?\d\d:\d\d) UTC "
                     r"\(delay 30 min\); trigger with relocate_now to start it now")


def xcom(run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id,
                                                 key="return_value")).first()
        assert row is not None, f"{task_id} pushed no report"
        return XComModel.deserialize_value(row)


@pytest.fixture
def lake_env(airflow_db, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "30")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    cat = Catalog(url, actor="pytest")
    cat.init()
    lake = Lake(cat, Clock(), tmp_path)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    lake.create("orders", buckets=4)
    lake.write("orders", "2026-11-01", range(400))
    yield lake
    cat.dispose()


def test_a_repair_inside_the_delay_is_skipped_and_relocate_now_repairs_at_once(lake_env):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import AirflowFailException

    cat = lake_env.catalog
    dag = DagBag(dag_folder=str(DAGS)).get_dag("colocate_maintenance")
    before, sums = rows(cat, "orders"), fingerprint(cat)
    be2 = lake_env.names["be2"]
    cat.backends.set_state("be2", "down", reason="disk pulled")  # an admin's mark: probes keep it down
    down_since = cat.backends.get("be2").state_since
    day = iter(pendulum.datetime(2026, 11, d, tz="UTC") for d in range(1, 30))

    def form(**fields):  # the trigger form sends every field
        return {"action": "repair", "dry_run": False, "relocate_now": False, "group": None, "table": None,
                "backend": None, "strategy": "count", **fields}

    # inside the delay: nothing moves, and the run says so with its balance task skipped
    run = dag.test(logical_date=next(day), run_conf=form())
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["check_params"] == "success" and states["balance"] == "skipped", states
    report = xcom(run, "balance")
    m = WAITING.fullmatch(report["outcome"])
    assert m, report["outcome"]
    assert m["at"].endswith(f"{down_since + timedelta(minutes=30):%H:%M}")
    assert report["jobs"] == [] and [p["backend"] for p in report["pending"]] == ["be2"]
    assert be2 in {be for row in cat.groups.get("g").bucket_map for be in row}

    # a decommission without a backend fails in check_params, in one line, before anything runs
    run = dag.test(logical_date=next(day), run_conf=form(action="decommission"))
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "failed" and states["check_params"] == "failed", states
    assert states["decommission"] == states["balance"] == "upstream_failed", states
    check = dag.get_task("check_params").python_callable
    with pytest.raises(AirflowFailException) as refused:
        check(params=form(action="decommission"))
    assert str(refused.value) == "decommission needs a backend: set 'backend' to one of be1, be2, be3"
    with pytest.raises(AirflowFailException, match="relocate_now applies to repair, balance, verify, decommission"):
        check(params=form(action="probe", relocate_now=True))
    assert check(params=form(dry_run=None)) == {"action": "repair", "dry_run": False, "relocate_now": False}

    # relocate_now: the same setup repairs at once, off be2, every row intact
    run = dag.test(logical_date=next(day), run_conf=form(relocate_now=True))
    assert run.state == "success" and run.get_task_instance("balance").state == "success"
    report = xcom(run, "balance")
    assert report["pending"] == [] and report["outcome"].startswith("done: 1 balance job ("), report["outcome"]
    group = cat.groups.get("g")
    assert group.stable and be2 not in {be for row in group.bucket_map for be in row}
    assert_whole(cat)
    assert fingerprint(cat) == sums and rows(cat, "orders") == before
    event, = [e for e in cat.events(limit=200) if e.kind == "balance.relocate_now"]
    assert event.subject == "be2" and event.detail["delay_minutes"] == 30
    assert event.actor.startswith("airflow:colocate_maintenance/balance/"), event.actor


def test_a_run_that_repaired_something_else_says_what_is_still_pending():
    now = datetime(2026, 11, 21, 14, 2, tzinfo=timezone.utc)
    waiting = PendingRelocation("be2", now, now + timedelta(minutes=30), timedelta(minutes=30), ("1_g",))
    later = PendingRelocation("be3", now, now + timedelta(days=1), timedelta(days=1), ("1_g",))
    job = {"job_id": 7, "group": "1_g", "kind": "repair", "state": "done", "step": "finished", "moves": 0,
           "cloned": 3, "bytes": 3072, "notes": []}
    assert outcome_line({"jobs": [job], "dropped": 2, "pending": [waiting.to_dict()]}, now) == (
        "done: 1 balance job (3 replicas cloned, 3.00 KiB); 2 redundant replicas dropped; pending: relocation of be2's "
        "buckets starts at 14:32 UTC (delay 30 min); trigger with relocate_now to start it now")
    assert outcome_line({"jobs": [], "pending": [waiting, later]}, now, "run with --relocate-now") == (
        "nothing moved: relocation of be2's buckets starts at 14:32 UTC (delay 30 min), of be3's at 2026-11-22 14:02 UTC; "
        "run with --relocate-now to start it now")
    assert outcome_line({"jobs": [], "dropped": 0}, now).startswith("nothing to do")
