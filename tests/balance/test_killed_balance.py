"""Issue 19: a balance killed mid-clone must never add rows.

``colocate balance --runner local`` (a process of its own, cloning with the clone job's task
function on threads, as a Spark executor would) moves buckets onto a new backend; it is frozen
(SIGSTOP) and killed (SIGKILL, with every process it started) while a copy is in flight (in its tmp
area, or in place in a new replica's directory), again when it is re-run, and once more after its
map switch; then it runs to the end. After every kill and at the end, with each backend marked down in turn (so every bucket is
read from its other replica), every read returns exactly the source rows. ``colocate gc`` then
leaves no temporary or unknown file on any backend.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from balance_lake import Clock, Lake

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main as colocate
from airflow_colocate.jobs.read import register
from airflow_colocate.storage import replica_dir

pytestmark = pytest.mark.spark

COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]
DAY = "2026-11-01"
ROWS = 200_000  # ~0.3 MB per bucket file: copies take long enough to be caught in flight


def _family(pid: int) -> dict:
    import psutil

    try:
        return {p.pid: p for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return {}


def kill_everything(proc: subprocess.Popen, known: dict) -> None:
    """Freeze the job and every process it started (``known`` first: PySpark's worker daemon runs
    in a process group of its own), then SIGKILL them all: a node lost mid-copy, no cleanup."""
    import psutil

    os.killpg(proc.pid, signal.SIGSTOP)
    for p in list(known.values()):
        try:
            p.suspend()
        except psutil.NoSuchProcess:
            pass
    family: dict = dict(known)
    while True:
        found = _family(proc.pid) | family
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


def temps(backends: Path) -> list[Path]:
    return [p for p in backends.rglob("*") if p.is_file() and replica_dir.is_tmp_name(p.name)]


def balance_cmd() -> list[str]:
    return [str(Path(sys.executable).with_name("colocate")), "balance", "--runner", "local", "--grace-minutes", "0"]


def run_until(until, env, timeout: float = 240) -> bool:
    """Run a balance; freeze and kill it as soon as ``until()`` is true. Returns whether it was
    killed (else it finished, successfully)."""
    proc = subprocess.Popen(balance_cmd(), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    known: dict = {}
    deadline = time.time() + timeout
    tick = 0
    try:
        while proc.poll() is None and time.time() < deadline:
            if until():
                kill_everything(proc, known)
                return True
            tick += 1
            if tick % 25 == 0:  # keep the family current, so the freeze reaches the workers at once
                known = _family(proc.pid) | known
            time.sleep(0.001)
    finally:
        if proc.poll() is None:
            kill_everything(proc, known)
    assert proc.returncode == 0, "the balance failed on its own"
    return False


FINGERPRINT = "SELECT '{t}' AS t, count(*), count(DISTINCT id), sum(CAST(xxhash64(id, v) AS DECIMAL(38, 0))) FROM {src}"


def fingerprints(spark, sources: dict[str, str]) -> dict[str, tuple]:
    """table -> (rows, distinct ids, sum of a 64-bit hash of every row), by Spark in one job: equal
    only for the same rows, each as often (a duplicate or a lost row changes it)."""
    sql = " UNION ALL ".join(FINGERPRINT.format(t=t, src=src) for t, src in sources.items())
    return {r[0]: tuple(r[1:]) for r in spark.sql(sql).collect()}


def read_all(spark, catalog: Catalog) -> dict[str, tuple]:
    register(spark, {"orders": None, "lines": None}, catalog=catalog)
    return fingerprints(spark, {"orders": "orders", "lines": "lines"})


def test_killed_balance_never_adds_rows_and_gc_leaves_no_unknown_file(spark, tmp_path, monkeypatch):
    started = time.time()
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    env = dict(os.environ, COLOCATE_CATALOG_URL=url, COLOCATE_HOME=str(tmp_path / "home"))
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    cat = Catalog(url, actor="pytest")  # the real clock: the balance runs in processes of their own
    cat.init()
    lake = Lake(cat, Clock(), tmp_path)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    backends = tmp_path / "backends"
    for i, table in enumerate(("orders", "lines")):
        lake.create(table, buckets=8, replicas=2)
        lake.write(table, DAY, range(i, ROWS * 2, 2))  # v = '<table>-<day>-<id>'
        spark.range(i, ROWS * 2, 2).selectExpr("id", f"concat('{table}-{DAY}-', id) AS v").createOrReplaceTempView(
            f"ref_{table}")
    expected = fingerprints(spark, {"orders": "ref_orders", "lines": "ref_lines"})
    assert read_all(spark, cat) == expected
    print(f"lake written and read in {time.time() - started:.0f}s")

    lake.add_backend("be4")  # balance moves its share of buckets there
    new = backends / "be4"

    def copying() -> bool:
        """A copy is in flight: a file in be4's tmp area, or (a new replica is written in place in
        the directory its clone made) in one of be4's replica directories."""
        return any(f.is_file() and len(f.relative_to(new).parts) > 1 for f in new.rglob("*"))

    def unregistered() -> set[Path]:
        """Files on be4 that no verified replica lists: what a killed copy left in place."""
        listed = {(Path(r.path.removeprefix("file://")), n) for t in ("orders", "lines")
                  for p in cat.reads.replicas(t)[1] for bucket in p.buckets for r in bucket for n, _ in r.files or ()}
        return {f for f in new.rglob("*") if f.is_file() and f.relative_to(new).parts[0] != "_colocate"
                and len(f.relative_to(new).parts) > 1 and (f.parent, f.name) not in listed}

    watcher = Catalog(url, actor="watch")

    def switched() -> bool:
        jobs = watcher.jobs.list(kinds=["balance"], limit=1)
        return bool(jobs) and jobs[0].step in ("switched", "finished")

    left_behind: set[Path] = set()
    killed = []
    for until in (copying, copying, switched):
        was_killed = run_until(until, env)
        killed.append(was_killed)
        left_behind.update(set(temps(backends)) | unregistered())
        # whatever state the kill left, reads see exactly the committed rows
        assert read_all(spark, cat) == expected
        for b in temps(backends):
            assert "_colocate/tmp" in b.as_posix(), f"a temporary file inside a replica directory: {b}"
        print(f"killed={was_killed} at {until.__name__}, read checked, {time.time() - started:.0f}s")
    assert killed[0], "the first balance finished before a copy could be caught: nothing was killed mid-copy"
    assert left_behind, "no kill left a temporary or half-written copy behind: gc and the re-runs had nothing to prove"

    assert not run_until(lambda: False, env)  # to the end
    assert [j.state for j in cat.jobs.list(kinds=["balance"])][0] == "done"
    health = cat.health.check_group("g")
    assert health.stable, health.reason
    assert {be for row in cat.groups.get("g").bucket_map for be in row} == {b.id for b in cat.backends.list()}

    # gc: every temporary copy goes; what stays is exactly the catalog's files
    assert colocate(["gc", "--grace-minutes", "0", "--stale-hours", "0", "--json"]) == 0
    assert temps(backends) == []
    recorded = {}
    for t in ("orders", "lines"):
        for p in cat.reads.replicas(t)[1]:
            for bucket in p.buckets:
                for r in bucket:
                    assert r.files is not None, r.path  # every write and clone records its files
                    recorded[Path(r.path.removeprefix("file://"))] = dict(r.files)
    for f in backends.rglob("*"):
        if f.is_dir() or f.relative_to(backends).parts[1] == "_colocate":
            continue
        assert f.parent in recorded and recorded[f.parent].get(f.name) == f.stat().st_size, f"unknown file {f}"
    assert all(sorted(p.name for p in d.iterdir()) == sorted(files) for d, files in recorded.items())

    # every bucket read from each of its replicas: mark each backend down in turn
    for b in cat.backends.list():
        cat.backends.set_state(b.name, "down", reason="test: read the other replica")
        try:
            assert read_all(spark, cat) == expected, f"with {b.name} down"
        finally:
            cat.backends.set_state(b.name, "alive")
    watcher.dispose()
    cat.dispose()
    print(f"killed {killed}, {len(left_behind)} temporary files left by kills, {time.time() - started:.0f}s")
