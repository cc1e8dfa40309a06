"""A write killed mid-job leaves the previous version visible and complete; gc removes the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_colocate.cli import main as colocate
from airflow_colocate.core.contract import Source
from airflow_colocate.jobs.write import ensure_table, write_in_session
from airflow_colocate.planner.write import write_plan
from airflow_colocate.storage import fs
from airflow_colocate.storage.plan_files import save_plan
from test_write_operator import make_source, read_back, write_op

pytestmark = pytest.mark.spark


def kill_everything(proc: subprocess.Popen) -> None:
    """SIGKILL the job and every process it started. PySpark's worker daemon moves itself into a
    process group of its own, so killing the job's group alone would leave its Python workers
    copying files for a moment after the 'crash'."""
    import psutil

    os.killpg(proc.pid, signal.SIGSTOP)  # freeze first, so nobody forks a worker we would miss
    family: dict[int, psutil.Process] = {}
    while True:
        found = {p.pid: p for p in psutil.Process(proc.pid).children(recursive=True)} | family
        for p in found.values():
            try:
                p.suspend()
            except psutil.NoSuchProcess:
                pass
        if found.keys() == family.keys():
            break
        family = found
    os.killpg(proc.pid, signal.SIGKILL)
    for p in family.values():
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()
    psutil.wait_procs(list(family.values()), timeout=30)
    assert not [p for p in family.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_killed_write_keeps_old_version_and_gc_cleans_up(colocate_env, spark, tmp_path, capsys):
    catalog = colocate_env
    ensure_table(catalog, "orders", write_op(tmp_path, "2026-11-01").table_spec())
    write_in_session(spark, catalog, "orders", "2026-11-01", Source(format="parquet", path=str(make_source(tmp_path / "v1", 2000))),
                     work_dir=tmp_path / "runs")
    before = read_back(catalog, "2026-11-01")
    assert len(before) == 2000

    # version 2: planned like the operator does, then the Spark job is killed while it writes
    big = make_source(tmp_path / "v2", 300_000, start=1_000_000)
    ticket = catalog.writes.begin("orders", "2026-11-01")
    plan = write_plan(ticket, Source(format="parquet", path=str(big)), str(tmp_path / "runs"))
    catalog.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                              ticket.missing, {"staging_uri": plan.staging_uri})
    plan_path = save_plan(plan, tmp_path / "runs" / "plan.json")
    staging = Path(plan.staging_uri.removeprefix("file://"))
    proc = subprocess.Popen([sys.executable, "-m", "airflow_colocate.spark.entry", "--plan", str(plan_path),
                             "--kind", "write", "--master", "local[2]"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    targets = [Path(t.path.removeprefix("file://")) for b in plan.buckets for t in b.replicas]
    deadline = time.time() + 180
    # kill it once it has begun placing bucket files on the backends, not only in staging
    while not any(t.exists() for t in targets) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    kill_everything(proc)  # like a node lost mid-task: no cleanup runs anywhere
    assert any(t.exists() for t in targets), "the job never reached the backends: nothing for gc to prove"

    assert catalog.partitions.list("orders", empty=True)[0].visible_version == 1
    assert read_back(catalog, "2026-11-01") == before  # old version readable and complete
    assert not fs.exists(plan.report_uri)  # killed before it could report

    # gc: the dead write is aborted and its staging and version directories removed
    assert colocate(["gc", "--grace-minutes", "0", "--stale-hours", "0", "--json"]) == 0
    capsys.readouterr()
    assert not staging.exists()
    assert [t for t in targets if t.exists()] == []  # the half-written version directories too
    assert read_back(catalog, "2026-11-01") == before
    assert catalog.jobs.get(ticket.job_id).state == "failed"
    # and a new write after all this works
    write_in_session(spark, catalog, "orders", "2026-11-01", Source(format="parquet", path=str(make_source(tmp_path / "v3", 10))),
                     work_dir=tmp_path / "runs")
    assert len(read_back(catalog, "2026-11-01")) == 10
