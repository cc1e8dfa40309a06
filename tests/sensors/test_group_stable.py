"""GroupStableSensor in poke, reschedule and deferrable mode, and its trigger run directly."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
    TaskDeferred,
)

from airflow_colocate.catalog import Catalog
from airflow_colocate.sensors.stable import XCOM_KEY, GroupStableSensor
from airflow_colocate.triggers.stable import GroupStableTrigger
from colocate_testing import add_local_backends


class FakeTI:
    def __init__(self):
        self.xcom: list[tuple[str, object]] = []

    def xcom_push(self, key, value):
        self.xcom.append((key, value))

    def get_first_reschedule_date(self, context):
        return None


@pytest.fixture
def env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    cat.tables.create("orders", [("id", "bigint")], ["id"], bucket_num=4, replication_num=2, colocate_with="g")
    yield cat, url
    cat.dispose()


def sensor(**kw) -> GroupStableSensor:
    kw.setdefault("poke_interval", 0.05)
    kw.setdefault("timeout", 5)
    return GroupStableSensor(task_id="wait_stable", group="g", **kw)


def later(seconds: float, fn) -> threading.Thread:
    def run():
        time.sleep(seconds)
        fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_poke_returns_the_state_and_pushes_it(env):
    cat, _ = env
    ti = FakeTI()
    state = sensor().execute({"ti": ti})
    assert state["stable"] and state["group"].endswith("_g") and state["reasons"] == []
    assert ti.xcom[-1] == (XCOM_KEY, state)


def test_poke_waits_with_reasons_until_stable(env, capsys):
    cat, _ = env
    cat.backends.set_state("be2", "down", reason="disk")
    ti = FakeTI()
    t = later(0.4, lambda: cat.backends.set_state("be2", "alive"))
    state = sensor().execute({"ti": ti})
    t.join()
    assert state["stable"]
    waiting = [v for k, v in ti.xcom if not v["stable"]]
    assert waiting and "backend be2 is down" in waiting[0]["reason"]
    logged = "".join(capsys.readouterr())
    assert "is not stable" in logged and "be2 is down" in logged


def test_timeout_and_soft_fail(env):
    cat, _ = env
    cat.backends.set_state("be1", "down")
    with pytest.raises(AirflowSensorTimeout):
        sensor(timeout=0.2).execute({"ti": FakeTI()})
    with pytest.raises(AirflowSkipException):
        sensor(timeout=0.2, soft_fail=True).execute({"ti": FakeTI()})


def test_reschedule_mode_frees_the_slot_between_pokes(env):
    cat, _ = env
    cat.backends.set_state("be1", "down")
    op = sensor(mode="reschedule", poke_interval=30, timeout=600)
    with pytest.raises(AirflowRescheduleException) as info:
        op.execute({"ti": FakeTI()})
    assert info.value.reschedule_date > datetime.now(timezone.utc) + timedelta(seconds=20)
    cat.backends.set_state("be1", "alive")
    assert op.execute({"ti": FakeTI()})["stable"]


def test_deferrable_hands_over_to_the_trigger_and_resumes(env):
    cat, url = env
    op = sensor(deferrable=True, poke_interval=7, timeout=120)
    assert op.execute({"ti": FakeTI()})["stable"]  # stable at once: no deferral
    cat.backends.set_state("be3", "down")
    with pytest.raises(TaskDeferred) as info:
        op.execute({"ti": FakeTI()})
    trigger = info.value.trigger
    assert info.value.method_name == "execute_complete"
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_colocate.triggers.stable.GroupStableTrigger"
    assert kwargs["group"] == "g" and kwargs["poll_interval"] == 7 and kwargs["timeout_at"]
    assert GroupStableTrigger(**kwargs).serialize() == (classpath, kwargs)

    ti = FakeTI()
    state = op.execute_complete({"ti": ti}, {"status": "stable", "group": "1_g", "stable": True, "reasons": []})
    assert state["stable"] and ti.xcom[-1][0] == XCOM_KEY
    timeout_event = {"status": "timeout", "group": "1_g", "stable": False, "reason": "backend be3 is down"}
    with pytest.raises(AirflowSensorTimeout, match="be3 is down"):
        op.execute_complete({"ti": FakeTI()}, timeout_event)
    op.soft_fail = True
    with pytest.raises(AirflowSkipException):
        op.execute_complete({"ti": FakeTI()}, timeout_event)
    op.soft_fail = False
    with pytest.raises(AirflowException, match="boom"):
        op.execute_complete({"ti": FakeTI()}, {"status": "error", "message": "boom"})


async def first_event(trigger: GroupStableTrigger, timeout: float = 10):
    agen = trigger.run()
    try:
        return await asyncio.wait_for(agen.__anext__(), timeout)
    finally:
        await agen.aclose()
        trigger.cleanup()


def test_trigger_polls_asynchronously_until_stable(env):
    cat, url = env
    cat.backends.set_state("be3", "down")

    async def main():
        trigger = GroupStableTrigger("g", catalog_url=url, poll_interval=0.05)
        ticks = 0

        async def heartbeat():  # the event loop stays free while the trigger waits
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        later(0.3, lambda: cat.backends.set_state("be3", "alive"))
        event = await first_event(trigger)
        beat.cancel()
        return event, ticks

    event, ticks = asyncio.run(main())
    assert event.payload["status"] == "stable" and event.payload["stable"] and event.payload["reasons"] == []
    assert ticks > 10


def test_trigger_timeout_and_error_events(env):
    cat, url = env
    cat.backends.set_state("be3", "down")
    past = (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat()
    event = asyncio.run(first_event(GroupStableTrigger("g", catalog_url=url, poll_interval=0.05, timeout_at=past)))
    assert event.payload["status"] == "timeout" and "be3 is down" in event.payload["reason"]
    event = asyncio.run(first_event(GroupStableTrigger("nope", catalog_url=url, poll_interval=0.05)))
    assert event.payload["status"] == "error" and "unknown colocation group" in event.payload["message"]


SENSOR_DAG = """
import pendulum
from airflow.sdk import DAG
from airflow_colocate.sensors.stable import GroupStableSensor

with DAG("colocate_sensor_deferral", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")):
    GroupStableSensor(task_id="wait_stable", group="g", deferrable=True, poke_interval=1, timeout=60)
"""


def handed_over(states: list[str]) -> bool:
    """The task deferred if Airflow stored it as deferred, or if it ran and went back to queued
    (dag.test() re-queues it while it runs the trigger in line). The running phase can be shorter
    than the 0.1 s poll, so "deferred" alone is proof enough."""
    if "deferred" in states:
        return True
    return "running" in states and "queued" in states[states.index("running"):]


def test_deferrable_sensor_in_a_dag_run_defers_to_its_trigger_and_resumes(env, airflow_db, tmp_path, monkeypatch):
    """Through Airflow's own deferral path: dag.test() stores the trigger, imports it from its
    classpath, runs it until it fires, and resumes the task with execute_complete. be3 comes back
    only once Airflow's database shows the task handed over (running, then deferred, or queued
    while dag.test() runs the trigger in line), so the test fails if it never defers."""
    import pendulum
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    cat, _ = env
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "sensor_dag.py").write_text(SENSOR_DAG)
    monkeypatch.setattr("airflow.settings.DAGS_FOLDER", str(dags))  # read by the dags-folder bundle
    dag = DagBag(dag_folder=str(dags)).get_dag("colocate_sensor_deferral")
    cat.backends.set_state("be3", "down")
    seen: list[str] = []

    def mend_once_deferred():
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                with create_session() as session:
                    state = session.scalar(select(TaskInstance.state).where(
                        TaskInstance.dag_id == "colocate_sensor_deferral", TaskInstance.task_id == "wait_stable"))
                if state and (not seen or seen[-1] != state):
                    seen.append(state)
                if handed_over(seen):
                    time.sleep(1)  # let the trigger poll the unstable group a few times
                    return
                time.sleep(0.1)
        finally:
            cat.backends.set_state("be3", "alive")  # also when it never deferred: the run must end

    mender = threading.Thread(target=mend_once_deferred, daemon=True)
    mender.start()
    run = dag.test(logical_date=pendulum.datetime(2026, 11, 21, tz="UTC"))
    mender.join()
    ti = run.get_task_instance("wait_stable")
    assert handed_over(seen), f"the sensor never deferred: {seen}"
    assert run.state == "success" and ti.state == "success"
    assert ti.next_method is None and ti.try_number == 1  # resumed in the same try, not retried
