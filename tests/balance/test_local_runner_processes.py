"""The local runner runs a large plan in worker processes (issue 29: each clone's Python and system
calls on every core, not one thread at a time under the interpreter lock): the results must be the
ones the in-process run gives, clone for clone, and a worker that dies must come back as failed
results the control plane retries, never as a hang or a lost task."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest

from airflow_colocate.core.contract import ClonePlan, CloneTask
from airflow_colocate.jobs import runners
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import durability
from airflow_colocate.storage import fs, layout

N = 12


def _die(items, threads):
    """A worker process that dies mid-chunk (the OOM killer, a segfault): no result, no exception."""
    os._exit(3)


def _plan(tmp_path, dst_name: str, corrupt: int | None = None) -> ClonePlan:
    """N one-file replicas (up to 1.3 MB, so a large file's early write-back runs too) cloned to a new backend;
    replica ``corrupt``'s source holds other bytes than the catalog's checksum."""
    src, dst = tmp_path / "src", tmp_path / dst_name
    (dst / "_colocate" / "tmp").mkdir(parents=True, exist_ok=True)
    copies = []
    for i in range(N):
        folder = src / f"p{i % 3}" / f"b{i}"
        name = f"part-{i}.parquet"
        data = hashlib.sha256(str(i).encode()).digest() * (64 * (i + 1) if i % 5 else 1 + (i << 12))
        if not (folder / name).exists():
            folder.mkdir(parents=True)
            (folder / name).write_bytes(data if i != corrupt else data[:-1] + b"!")
        sha = hashlib.sha256(data).hexdigest()
        copies.append(CloneTask(key=f"{i}:1:{i}:2", table="db.t", partition_id=i, partition=f"p{i % 3}", version=1,
                                bucket_seq=i, backend_id=2, src_backend_id=1, src=folder.as_uri(),
                                dst=(dst / f"p{i % 3}" / f"b{i}").as_uri(), checksum=replica_dir.replica_checksum([(name, sha)]),
                                bytes=len(data), rows=i + 1, files={name: sha}, sizes={name: len(data)}, root=dst.as_uri()))
    return ClonePlan(job_id="j1", copies=copies, report_uri="")


def _comparable(report, dst_name: str) -> list[dict]:
    out = []
    for c in report.copies:
        row = {k: v for k, v in vars(c).items() if k != "seconds"}
        row["path"] = c.path.replace(dst_name, "<dst>")
        row["error"] = (c.error or "").replace(dst_name, "<dst>")
        out.append(row)
    return out


@pytest.fixture
def few_tasks_suffice(monkeypatch):
    monkeypatch.setattr(runners, "PROCESS_MIN_TASKS", 4)


def test_worker_processes_report_what_this_process_reports(tmp_path, few_tasks_suffice):
    in_process = runners.local_runner(processes=0)(_plan(tmp_path, "be-threads", corrupt=7))
    pooled = runners.local_runner(processes=2)
    try:
        report = pooled(_plan(tmp_path, "be-procs", corrupt=7))
        assert pooled.stats["chunks"] == 2 and pooled.stats["cpu"] > 0 and pooled.stats["syncs"] >= 2
        again = pooled(_plan(tmp_path, "be-procs-2"))  # the same workers serve the next plan
    finally:
        pooled.close()
    assert _comparable(report, "be-procs") == _comparable(in_process, "be-threads")
    assert [c.key for c in report.copies if not c.ok] == ["7:1:7:2"] and [c.source_bad for c in report.copies].count(True) == 1
    assert report.bytes == in_process.bytes > 0 and [c.key for c in again.copies if not c.ok] == ["7:1:7:2"]
    for c in report.copies:  # the clones are on disk, named and whole; nothing is left staged
        if c.ok:
            digests = [(n, copy_mod.sha256_file(fs.join(c.path, n))) for n, _ in replica_dir.replica_files(c.path)]
            assert replica_dir.replica_checksum(digests) == c.checksum
    assert os.listdir(fs.local_path(layout.tmp_dir((tmp_path / "be-procs").as_uri()))) == []


def test_a_worker_that_dies_fails_its_tasks_and_the_next_plan_gets_new_workers(tmp_path, few_tasks_suffice):
    runner = runners.local_runner(processes=2)
    try:
        runner._work = _die
        report = runner(_plan(tmp_path, "be-dead"))
        assert len(report.copies) == N and not any(c.ok for c in report.copies)
        assert all("worker process" in c.error and "BrokenProcessPool" in c.error for c in report.copies), report.copies[0].error
        assert report.bytes == 0 and {c.key for c in report.copies} == {t.key for t in _plan(tmp_path, "be-dead").copies}
        runner._work = runners.LocalRunner(None, 0)._work  # the real chunk function again
        retried = runner(_plan(tmp_path, "be-dead"))  # what balance does with failed clones: again
        assert all(c.ok for c in retried.copies), [c.error for c in retried.copies if not c.ok]
    finally:
        runner.close()


def test_warm_starts_the_workers_ahead_and_the_first_plan_uses_them(tmp_path, few_tasks_suffice, monkeypatch):
    with runners.local_runner(processes=0) as here:
        here.warm()  # no worker processes asked for: nothing to start
        assert here._pool is None
    with runners.local_runner(processes=2) as runner:
        gate, real_started = threading.Event(), runner._started

        def slow_start():  # a fork server that takes its time: warm() must not wait for it
            assert gate.wait(30)
            return real_started()

        monkeypatch.setattr(runner, "_started", slow_start)
        runner.warm()  # returns while the start is held
        assert runner._pool is None and runner._warming
        runner.warm()  # starting already: nothing more
        gate.set()
        deadline = time.time() + 30
        while runner._pool is None and time.time() < deadline:
            time.sleep(0.01)
        pool = runner._pool
        assert pool is not None
        deadline = time.time() + 30
        while len(pool._processes) < 2 and time.time() < deadline:  # started in the background
            time.sleep(0.01)
        assert len(pool._processes) == 2
        started = set(pool._processes)
        runner.warm()  # running already: nothing more
        report = runner(_plan(tmp_path, "be-warm"))
        assert runner._pool is pool and set(pool._processes) == started  # the same workers did the plan
        assert sum(c.ok for c in report.copies) == N and runner.stats["chunks"] == 2


def test_a_small_plan_stays_in_this_process(tmp_path):
    runner = runners.local_runner(processes=2)
    report = runner(_plan(tmp_path, "be-small"))  # 12 tasks < PROCESS_MIN_TASKS: no pool is started
    assert runner._pool is None and runner.stats["chunks"] == 0 and all(c.ok for c in report.copies)


@pytest.mark.parametrize("kwargs, words", [({"threads": 0}, "threads must be at least 1, got 0"),
                                           ({"processes": -1}, "processes must be 0")])
def test_bad_arguments_are_refused_in_one_line(kwargs, words):
    with pytest.raises(ValueError, match=words):
        runners.local_runner(**kwargs)


def test_a_pipelined_partition_keeps_the_crash_rule_clone_by_clone(tmp_path, monkeypatch):
    """From PIPELINE_MIN tasks, a partition is two batches, the first made durable and published on
    another thread while the second is staged: each clone's bytes are still durable before its name,
    and its name before the partition returns."""
    from airflow_colocate.spark import clone_job

    events: list[tuple[str, object]] = []
    real_durable, real_publish = durability.make_durable, copy_mod.publish
    monkeypatch.setattr(durability, "make_durable", lambda uris, watch=None: (events.append(("durable", set(uris))), real_durable(uris, watch))[1])
    monkeypatch.setattr(copy_mod, "publish", lambda st: (events.append(("publish", st)), real_publish(st))[1])
    monkeypatch.setattr(clone_job, "PIPELINE_MIN", 4)
    items = clone_job.task_items(_plan(tmp_path, "be-pipe", corrupt=3))
    results = clone_job.run_partition(items, 2)
    monkeypatch.setattr(clone_job, "PIPELINE_MIN", 10_000)
    whole = clone_job.run_partition(clone_job.task_items(_plan(tmp_path, "be-whole", corrupt=3)), 2)
    assert sum(1 for kind, _ in events if kind == "durable") >= 6  # two batches (bytes, names) and the whole one
    assert [r["key"] for _, r in results] == [t["key"] for _, t in items]
    strip = [{k: (v.replace("be-pipe", "<dst>") if isinstance(v, str) else v) for k, v in r.items() if k != "seconds"}
             for _, r in results]
    assert strip == [{k: (v.replace("be-whole", "<dst>") if isinstance(v, str) else v) for k, v in r.items() if k != "seconds"}
                     for _, r in whole]
    for i, (kind, what) in enumerate(events):
        if kind == "publish" and "be-pipe" in what.dst:
            assert any(k == "durable" and what.tmp in uris for k, uris in events[:i]), what  # bytes before the name
            assert any(k == "durable" and fs.parent(what.dst) in uris for k, uris in events[i + 1:]), what  # then the name
    assert [r["ok"] for _, r in results].count(False) == 1


def test_where_no_process_can_start_the_copies_run_here(tmp_path, few_tasks_suffice, monkeypatch, caplog):
    """E.g. inside a daemonic Celery worker (multiprocessing refuses children there)."""

    def refuse():
        raise AssertionError("daemonic processes are not allowed to have children")

    monkeypatch.setattr(runners, "_process_context", refuse)
    runner = runners.local_runner(processes=2)
    report = runner(_plan(tmp_path, "be-here"))
    assert all(c.ok for c in report.copies) and runner.processes == 0 and runner._pool is None
    assert "cannot start" in caplog.text and "daemonic" in caplog.text


def test_workers_exit_when_the_process_that_started_them_ends_without_cleanup(tmp_path):
    """An Airflow task ends with ``os._exit`` (no atexit, no close): its clone workers must not stay
    behind, waiting on their queues for ever, one fork server and a worker per core per task run."""
    import subprocess
    import sys
    import time

    script = ("import os\nfrom airflow_colocate.jobs.runners import local_runner\n"
              "r = local_runner(processes=2)\npool = r._started()\n"
              "pids = {pool.submit(os.getpid).result() for _ in range(8)}\n"
              "print(' '.join(map(str, pids)), flush=True)\nos._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    pids = [int(p) for p in out.stdout.split()]
    assert pids, out.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], f"clone workers {pids} outlived their parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_leaving_the_with_block_stops_the_workers():
    with runners.local_runner(processes=2) as r:
        pid = r._started().submit(os.getpid).result()
    assert r._pool is None and not _alive(pid)


@pytest.mark.parametrize("pipeline_min", [4, 10_000], ids=["two batches", "one batch"])
def test_each_batch_syncs_through_a_descriptor_it_opened_before_its_first_write(tmp_path, monkeypatch, pipeline_min):
    """syncfs reports a write-back error only to a descriptor opened before the error: a batch that
    opened its own at the end could miss an error another batch's syncfs already saw, and publish
    bytes that never reached the disk. So every batch's syncs go through descriptors it opened
    before it staged anything, and none of them is left open."""
    from airflow_colocate.spark import clone_job

    events: list[tuple[str, object]] = []
    real_watch, real_stage, real_durable = durability.watch_durability, copy_mod.stage_file, durability.make_durable
    monkeypatch.setattr(durability, "watch_durability", lambda roots: (w := real_watch(roots), events.append(("watch", w)))[0])
    monkeypatch.setattr(copy_mod, "stage_file", lambda *a, **k: (events.append(("stage", None)), real_stage(*a, **k))[1])
    monkeypatch.setattr(durability, "make_durable", lambda uris, watch=None: (events.append(("durable", watch)), real_durable(uris, watch))[1])
    monkeypatch.setattr(clone_job, "PIPELINE_MIN", pipeline_min)
    open_before = len(os.listdir("/proc/self/fd"))
    results = clone_job.run_partition(clone_job.task_items(_plan(tmp_path, "be-watch")), 2)
    assert all(r["ok"] for _, r in results)
    watches = [w for kind, w in events if kind == "watch"]
    assert len(watches) == (2 if pipeline_min == 4 else 1) and all(watches)  # one descriptor per batch and file system
    first_stage = next(i for i, (kind, _) in enumerate(events) if kind == "stage")
    assert all(i < first_stage for i, (kind, _) in enumerate(events) if kind == "watch")
    synced = [w for kind, w in events if kind == "durable"]
    assert len(synced) == 2 * len(watches) and all(any(w is x for x in watches) for w in synced)
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_a_pool_broken_while_idle_gets_new_workers_not_threads(tmp_path, few_tasks_suffice):
    import signal
    import time

    r = runners.local_runner(processes=2)
    try:
        pool = r._started()
        pid = pool.submit(os.getpid).result()
        os.kill(pid, signal.SIGKILL)  # killed between two plans
        deadline = time.monotonic() + 10
        while not pool._broken and time.monotonic() < deadline:
            time.sleep(0.05)
        report = r(_plan(tmp_path, "be-idle"))
        assert all(c.ok for c in report.copies) and r.processes == 2 and r.stats["chunks"] == 2
    finally:
        r.close()


@pytest.mark.parametrize("cores, workers", [(None, 1), (1, 1), (2, 3), (4, 5), (16, 8)])
def test_one_worker_more_than_cores_keeps_them_busy_while_one_waits_in_syncfs(monkeypatch, cores, workers):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert runners.default_processes() == workers
    assert runners.LocalRunner(None, None).processes == workers
