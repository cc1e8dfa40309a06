"""The maintenance DAG's retention task (issue 28): a real ``dag.test()`` run, no Spark. A table
with a 3-day retention over ten daily partitions; the run's ``today`` (the injected clock of the
form) makes it drop exactly the partitions dated before today - 3 into the recycle bin, leaving a
table without retention alone; gc erases their files only after the recycle-bin window and the
grace (a catalog with a clock moved forward)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pendulum
from daily_pipeline import DAGS, task_xcom
from test_maintenance_alert import Clock

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReplicaReport, WriteReport
from airflow_colocate.jobs.retention import apply_retention

DAYS = [(date(2026, 11, 1) + timedelta(days=i)).isoformat() for i in range(10)]


def commit_fake_write(cat: Catalog, table: str, partition: str) -> None:
    """A partition committed as the write job would report it, its files in the version directory."""
    ticket = cat.writes.begin(table, partition)
    paths = {}
    for seq, bucket in enumerate(ticket.targets):
        for be, root in bucket:
            folder = Path(root.removeprefix("file://")) / table / partition / f"v{ticket.version:06d}" / f"b{seq:05d}"
            folder.mkdir(parents=True)
            (folder / "part-0.parquet").write_bytes(b"x" * 100)
            paths[seq, be] = folder.as_uri()
    cat.writes.set_targets(ticket.job_id, {seq: [be for be, _ in bucket] for seq, bucket in enumerate(ticket.targets)},
                           ticket.missing, {})
    replicas = [ReplicaReport(seq, be, paths[seq, be], ["part-0.parquet"], 10, 100, f"{seq:064x}", {"part-0.parquet": 100})
                for seq, bucket in enumerate(ticket.targets) for be, _ in bucket]
    cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), ticket.table.qualified_name, partition,
                                                ticket.version, 10 * len(ticket.targets), replicas, 0.1, "test"))


def files_of(cat: Catalog, table: str, value: str) -> list[Path]:
    return [Path(b[0].path.removeprefix("file://")) for p in cat.reads.replicas(table, [value])[1] for b in p.buckets]


def test_retention_drops_exactly_the_older_partitions_then_gc_erases_them(airflow_db, tmp_path, monkeypatch, capfd, caplog):
    from airflow.dag_processing.dagbag import DagBag

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    cat = Catalog(url, actor="pytest")
    cat.init()
    for name in ("be1", "be2"):
        (tmp_path / name).mkdir()
        cat.backends.add((tmp_path / name).as_uri(), name=name)
    for table, days in (("events", 3), ("keep", None)):
        cat.tables.create(table, [("k", "bigint"), ("v", "string"), ("dt", "date")], ["k"], bucket_num=2,
                          partition_cols=["dt"], colocate_with="g_daily", retention_days=days)
        for day in DAYS:
            commit_fake_write(cat, table, day)
    old = {day: files_of(cat, "events", day) for day in DAYS[:6]}
    assert all(f.exists() for fs in old.values() for f in fs)

    dag = DagBag(dag_folder=str(DAGS)).dags["colocate_maintenance"]
    run = dag.test(logical_date=pendulum.now("UTC"), run_conf={"action": "retention", "today": DAYS[-1]})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["retention"] == "success" and states["balance"] == "skipped", states
    out = "".join(capfd.readouterr()) + caplog.text  # issue 47: one sentence says what it did, no "Returned value was"
    assert "retention: dropped 6 partition(s) past their table's retention into the recycle bin" in out, out[-3000:]
    assert "alert: nothing overdue" in out and "action retention: runs retention" in out, out[-3000:]
    assert "Returned value was" not in out, out[-3000:]
    result = task_xcom(run, "retention")
    # today 2026-11-10, 3 days: 2026-11-07 .. 2026-11-10 stay
    assert [e["partition"] for e in result["expired"]] == DAYS[:6] and result["purged"] == []
    assert [p.value for p in cat.partitions.list("events")] == DAYS[6:]
    assert [p.value for p in cat.partitions.list("events", dropped=True)] == DAYS[:6]
    assert len(cat.partitions.list("keep")) == 10
    assert all(f.exists() for fs in old.values() for f in fs)  # in the recycle bin: recoverable
    assert cat.health.check_group("g_daily").stable

    clock = Clock(datetime.now(timezone.utc) + timedelta(days=1, minutes=1))  # past the recycle-bin window
    later = Catalog(url, actor="pytest", clock=clock)
    first = apply_retention(later, today=date.fromisoformat(DAYS[-1]))
    assert [p["partition"] for p in first.purged] == DAYS[:6] and first.expired == []
    assert all(f.exists() for fs in old.values() for f in fs)  # purged; gc waits for the grace
    clock.t += timedelta(hours=1, minutes=1)
    second = apply_retention(later, today=date.fromisoformat(DAYS[-1]))
    assert second.erased and not any(f.exists() for fs in old.values() for f in fs)
    assert first.sentence() == "retention: purged 6 partition(s) from the recycle bin"
    assert second.sentence().startswith("retention: erased ")
    assert apply_retention(later, today=date.fromisoformat(DAYS[-1])).sentence().startswith("retention: nothing to do")
    assert all(f.exists() for day in DAYS[6:] for f in files_of(cat, "events", day))
    assert cat.partitions.list("events", dropped=True) == []
    later.dispose()
    cat.dispose()
