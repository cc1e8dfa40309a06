"""The maintenance DAG's alert task (issue 29, item 3): a real ``dag.test()`` run, no Spark. A
backend went down and its group became unstable at a time the catalog's clock says (injected: the
catalog that recorded the failure ran with a clock set back); the run's alert task fails with the
group's reason once that is longer ago than ``alert_after_minutes``, and succeeds before."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pendulum
import pytest

from daily_pipeline import DAGS

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReplicaReport, WriteReport


class Clock:
    def __init__(self, t: datetime):
        self.t = t

    def __call__(self) -> datetime:
        return self.t


def commit_fake_write(cat: Catalog, table: str, partition: str) -> None:
    """A partition committed as the write job would report it, with its files in place (the
    probe's sample checks them)."""
    ticket = cat.writes.begin(table, partition)
    for seq, bucket in enumerate(ticket.targets):
        for _, root in bucket:
            folder = Path(root.removeprefix("file://")) / table / f"b{seq}"
            folder.mkdir(parents=True)
            (folder / "part-0.parquet").write_bytes(b"x" * 100)
    cat.writes.set_targets(ticket.job_id, {seq: [be for be, _ in bucket] for seq, bucket in enumerate(ticket.targets)},
                           ticket.missing, {})
    replicas = [ReplicaReport(seq, be, f"{root}/{table}/b{seq}", ["part-0.parquet"], 10, 100, f"{seq:064x}")
                for seq, bucket in enumerate(ticket.targets) for be, root in bucket]
    cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), ticket.table.qualified_name, partition,
                                                ticket.version, 10 * len(ticket.targets), replicas, 0.1, "test"))


def failed_at(tmp_path, monkeypatch, ago: timedelta) -> Catalog:
    """A lake whose be2 was marked down (and its group found unstable) ``ago`` before now."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    clock = Clock(datetime.now(timezone.utc) - ago - timedelta(minutes=5))
    cat = Catalog(url, actor="pytest", clock=clock)
    cat.init()
    for name in ("be1", "be2", "be3"):
        (tmp_path / name).mkdir()
        cat.backends.add((tmp_path / name).as_uri(), name=name)
    cat.tables.create("orders", [("k", "bigint")], ["k"], bucket_num=3, replication_num=2, colocate_with="g_orders")
    commit_fake_write(cat, "orders", "all")
    assert cat.health.check_group("g_orders").stable
    clock.t += timedelta(minutes=5)
    cat.backends.set_state("be2", "down", reason="disk replaced")
    assert not cat.health.check_group("g_orders").stable
    return cat


def run_alert(minutes: float):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS)).dags["colocate_maintenance"]
    run = dag.test(logical_date=pendulum.now("UTC"),
                   run_conf={"action": "probe", "group": None, "table": None, "backend": None,
                             "alert_after_minutes": minutes})
    return dag, run


@pytest.mark.parametrize("ago, fails", [(timedelta(hours=2), True), (timedelta(minutes=20), False)])
def test_the_alert_task_fails_with_the_reason_past_the_threshold(airflow_db, tmp_path, monkeypatch, ago, fails):
    from airflow.sdk.exceptions import AirflowFailException

    cat = failed_at(tmp_path, monkeypatch, ago)
    dag, run = run_alert(60)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["probe"] == "success" and states["balance"] == "skipped", states
    assert states["alert"] == ("failed" if fails else "success"), states
    assert run.state == ("failed" if fails else "success")

    # what the failure (and so the notification) says: the task's own callable, same params
    alert = dag.get_task("alert").python_callable
    if not fails:
        assert alert(params={"alert_after_minutes": 60}) == {"threshold_minutes": 60.0, "overdue": []}
        return
    with pytest.raises(AirflowFailException) as failure:
        alert(params={"alert_after_minutes": 60})
    text = str(failure.value)
    group = cat.groups.get("g_orders").full_name
    assert f"group {group} (" in text and "unstable for 2:0" in text, text
    assert "backend be2 is down" in text and "threshold 1:00:00" in text, text
    assert "backend be2 down for 2:0" in text and "admin: disk replaced" in text, text
    cat.dispose()


def test_the_default_threshold_is_twice_the_relocate_delay_and_at_least_10_minutes(monkeypatch):
    from airflow_colocate.core.errors import InvalidArgument
    from airflow_colocate.jobs.alerts import threshold_of

    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "45")
    assert threshold_of(None) == timedelta(minutes=90) == threshold_of("")
    assert threshold_of(15) == timedelta(minutes=15)
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "0")  # repair at once: no alert on a blip
    assert threshold_of(None) == timedelta(minutes=10)
    with pytest.raises(InvalidArgument, match="expected a number of minutes"):
        threshold_of("soon")
