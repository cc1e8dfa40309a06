"""Runners execute a clone plan and return its report: the one seam between the balance loop and
Spark. The balance loop does not care which one it is given."""

from __future__ import annotations

import logging
import sys
import threading
import time
import types
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from contextlib import contextmanager

from airflow_colocate.core.contract import (
    ClonePlan,
    CloneReport,
    CloneResult,
    VerifyResult,
)

Runner = Callable[[ClonePlan], CloneReport]


class _PlanFuture(Future):
    """A plan's report in worker processes: cancelling it cancels the plan's chunks that no worker
    has taken yet (the balance does when a batch before failed)."""

    parts: list = []

    def cancel(self) -> bool:
        for part in self.parts:
            part.cancel()
        return super().cancel()


log = logging.getLogger("airflow_colocate.jobs.runners")


def session_runner(spark) -> Runner:
    """Run clone plans in an existing Spark session (tests, notebooks, the CLI). The session may be
    one a user started on a cluster that never installed this package, while the clone runs this
    package's copy function on its executors: the package is shipped to it first (once per
    application; :func:`airflow_colocate.spark.shipping.ship`)."""
    from airflow_colocate.spark.clone_job import run_clone
    from airflow_colocate.spark.shipping import ship

    ship(spark)
    return lambda plan: run_clone(spark, plan)


# A plan at least this many tasks is run in worker processes (when the machine has more than one
# core): each clone costs ~0.3-1 ms of Python and system calls, which threads of one process run
# one at a time (the interpreter lock); below it a pool's start (~0.1 s) would not pay.
PROCESS_MIN_TASKS = 64
# Chunks per worker process of one plan, each one batch of the clone job (one syncfs per file system
# per chunk): more would wait for the disk more often, fewer would leave a core idle.
CHUNKS_PER_PROCESS = 1
# At most this many worker processes by default (one per core and one more, up to it).
MAX_PROCESSES = 8


def default_processes() -> int:
    """One worker process per core and one more (on a machine of two cores or more): a worker
    waits in ``syncfs`` for its batch's write-back at the end of every chunk, and the extra one keeps
    the cores busy meanwhile. Measured on 2 cores (bench_repair.py --processes 2,3 and 3,4,
    interleaved): 3 workers repaired in 0.92 s median against 1.14 s for 2, and 4 in 1.19 s
    against 1.10 s for 3 (docs/benchmarks.md)."""
    import os

    cores = os.cpu_count() or 1
    return min(cores + 1 if cores > 1 else 1, MAX_PROCESSES)


def _process_context():
    """A start method that is safe in a process with threads (the catalog's pools, Airflow's):
    a fork server that has imported only the clone job, else spawn."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["airflow_colocate.spark.clone_job"])
    return ctx


_MAIN_LOCK = threading.Lock()


@contextmanager
def _bare_main():
    """``__main__`` hidden while worker processes are started: multiprocessing would otherwise
    run the parent's main script again in the fork server (an Airflow task's, with every import
    it makes; a script read from stdin, which fails). The workers need only the clone job. Under a
    lock, and put back only if it is still ours: two runners starting at once must not leave the
    placeholder in place."""
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        bare = sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None and sys.modules.get("__main__") is bare:
                sys.modules["__main__"] = main


def _exit_with_parent(parent: int) -> None:
    """A worker process's initializer: exit when the process that started the pool is gone.

    An Airflow task ends with ``os._exit``, and a killed one runs no atexit hook, so the pool is
    never shut down; its workers (children of the fork server, not of the task) would wait on their
    queues for ever, and the fork server with them. A daemon thread waits on the parent's pidfd
    (Linux), else checks every second that it is still there."""
    import os

    def watch() -> None:
        try:
            fd = os.pidfd_open(parent)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            import select

            select.select([fd], [], [])
        else:
            while True:
                try:
                    os.kill(parent, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="colocate-clone-parent-watch", daemon=True).start()


class LocalRunner:
    """:func:`local_runner`'s runner: a callable plan -> report, which also keeps what its worker
    processes spent (``stats``: CPU seconds, seconds and calls making copies durable), since this
    process's clock does not see them. ``close()`` (or leaving ``with local_runner() as runner:``)
    stops the worker processes; so do garbage collection and a normal exit, and the workers exit by
    themselves when this process is gone (:func:`_exit_with_parent`)."""

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __init__(self, threads: int | None, processes: int | None) -> None:
        from airflow_colocate.spark import clone_job

        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if processes is not None and processes < 0:
            raise ValueError(f"processes must be 0 (in this process) or more, got {processes}")
        self._clone_job = clone_job
        self.threads = clone_job.DEFAULT_THREADS if threads is None else threads
        # a worker process runs its chunk on one thread unless told otherwise: a second thread only
        # adds the interpreter lock's handover (the processes already fill the cores)
        self.worker_threads = 1 if threads is None else threads
        self.processes = default_processes() if processes is None else processes
        self._pool = None
        self._lock = threading.Lock()  # plans finish on the pool's thread while the caller submits more
        self._broken_pool = None  # a pool a worker died in, closed by the next submit if still ours
        self._warming = False
        self._work = clone_job.run_chunk  # module-level: what a worker process is sent by reference
        self.stats = {"cpu": 0.0, "durable": 0.0, "syncs": 0, "chunks": 0, "wall": 0.0}

    @property
    def concurrent_plans(self) -> int:
        """Plans worth having under way at once (:meth:`submit`): with worker processes, two, so
        the workers take the next plan's chunks as they finish this one's instead of waiting while
        the caller registers it; copies on threads here gain nothing from more."""
        return 2 if self.processes > 1 else 1

    def __call__(self, plan: ClonePlan) -> CloneReport:
        return self.submit(plan).result()

    def warm(self) -> None:
        """Start the worker processes on a thread of their own, so that the first large plan finds
        them ready: a fork server and its workers take ~0.3 s to start here (the first submit
        starts them in the calling thread), which the balance would otherwise wait for after its
        catalog work (it calls this when a large job is about to clone). Returns at once; does
        nothing without worker processes, or when they are started or starting."""
        with self._lock:
            if self.processes <= 1 or self._pool is not None or self._warming:
                return
            self._warming = True
        threading.Thread(target=self._warm, name="colocate-clone-warm", daemon=True).start()

    def _warm(self) -> None:
        try:
            pool = self._started()
            with _bare_main():  # a submit may start a worker process
                for _ in range(self.processes):  # one empty chunk each: every worker is started
                    pool.submit(self._work, [], 1)
        except Exception as exc:  # noqa: BLE001 - the first plan finds out and says so (threads here)
            log.debug(f"clone worker processes not started ahead: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._warming = False

    def submit(self, plan: ClonePlan) -> Future:
        """Start ``plan`` and return the future of its report. In worker processes the plan's
        chunks are queued at once, in this thread, behind those of the plans submitted before it
        (the workers take them in that order; a later plan's last chunk may still end first); on
        threads here (a small plan, or no worker processes) it runs before this returns.
        Cancelling the future cancels the chunks no worker has taken yet."""
        started = time.time()
        with self._lock:
            broken, self._broken_pool = self._broken_pool, None
        if broken is not None and broken is self._pool:  # a worker died under an earlier plan: fresh workers
            self.close()
        items = self._clone_job.task_items(plan)  # biggest first, as the Spark job deals them
        future = _PlanFuture()
        future.set_running_or_notify_cancel()
        if self.processes > 1 and len(items) >= PROCESS_MIN_TASKS:
            n = min(len(items), self.processes * CHUNKS_PER_PROCESS)
            chunks = [list(range(i, len(items), n)) for i in range(n)]
            try:
                pool, parts = self._submit(items, chunks)
            except Exception as exc:  # no process can start here (limits, a sandbox, a daemonic Celery worker): threads
                log.warning(f"clone worker processes cannot start ({type(exc).__name__}: {exc}); "
                            f"copying on threads in this process")
                self.close()
                self.processes = 0
            else:
                left = [len(parts)]
                future.parts = parts

                def one_done(_) -> None:
                    with self._lock:
                        left[0] -= 1
                        last = left[0] == 0
                    if last:
                        try:
                            future.set_result(self._report(plan, started, self._gathered(items, chunks, parts, pool)))
                        except BaseException as exc:  # noqa: BLE001 - the caller's future carries it
                            future.set_exception(exc)

                for part in parts:
                    part.add_done_callback(one_done)
                return future
        try:
            future.set_result(self._report(plan, started, self._clone_job.run_partition(items, self.threads) if items else []))
        except BaseException as exc:  # noqa: BLE001 - the caller's future carries it
            future.set_exception(exc)
        return future

    @staticmethod
    def _report(plan: ClonePlan, started: float, results: list[tuple[str, dict]]) -> CloneReport:
        copies = [CloneResult(**r) for kind, r in results if kind == "copy"]
        verifies = [VerifyResult(**r) for kind, r in results if kind == "verify"]
        return CloneReport(job_id=plan.job_id, copies=copies, verifies=verifies, seconds=round(time.time() - started, 3),
                           bytes=sum(c.bytes for c in copies if c.ok), spark_version="local")

    def _gathered(self, items: list[tuple[str, dict]], chunks: list[list[int]], parts: list,
                  pool) -> list[tuple[str, dict]]:
        """The finished chunks' results in the items' order. The items were dealt round robin (they
        come biggest first, so every chunk gets a fair share of bytes and files) into a few chunks
        per worker, each one message there and back. A chunk whose worker died comes back as failed
        results (retried by the control plane), and the next plan gets fresh workers."""
        results: list = [None] * len(items)
        broken = False
        for chunk, part in zip(chunks, parts):
            try:
                done, cost = part.result()
            except BaseException as exc:  # the worker died (BrokenProcessPool), the chunk could not be sent or was cancelled
                broken = broken or not isinstance(exc, CancelledError)
                error = f"the clone worker process failed: {type(exc).__name__}: {exc}"[:2000]
                done = [(items[i][0], self._clone_job.failed_result(items[i][0], items[i][1], error)) for i in chunk]
            else:
                with self._lock:
                    for k in ("cpu", "durable", "syncs", "wall"):
                        self.stats[k] += cost[k]
            with self._lock:
                self.stats["chunks"] += 1
            for i, r in zip(chunk, done):
                results[i] = r
        if broken:  # closed by the next submit (if still the runner's): this runs on the pool's own thread
            with self._lock:
                self._broken_pool = pool
        return results

    def _submit(self, items, chunks) -> tuple[object, list]:
        from concurrent.futures.process import BrokenProcessPool

        for attempt in (1, 2):
            pool = self._started()
            try:
                with _bare_main():  # a submit may start a worker process
                    return pool, [pool.submit(self._work, [items[i] for i in chunk], self.worker_threads)
                                  for chunk in chunks]
            except (BrokenProcessPool, RuntimeError):  # a worker died while the pool was idle (the OOM killer),
                self.close()                           # or the pool was just closed: new workers, once
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _started(self):
        from concurrent.futures import ProcessPoolExecutor

        with self._lock:
            pool = self._pool
            if pool is None:
                import os
                import weakref

                pool = self._pool = ProcessPoolExecutor(self.processes, mp_context=_process_context(),
                                                        initializer=_exit_with_parent, initargs=(os.getpid(),))
                weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)
            return pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def local_runner(threads: int | None = None, processes: int | None = None) -> LocalRunner:
    """Run clone plans on this machine, ``threads`` replicas at a time per process (default: the
    clone job's 4 in this process, 1 per worker process).

    For a small cluster whose backends this machine can reach, and for a control plane without
    Spark. Every task goes through the function the Spark clone job runs on its executors
    (:func:`airflow_colocate.spark.clone_job.run_partition`, i.e. ``clone_task``/``verify_task``),
    so a copy is hashed, verified and cleaned up exactly as on a cluster; only the spreading over
    executors is missing. Importing the clone job does not import pyspark.

    A plan of :data:`PROCESS_MIN_TASKS` tasks or more runs in ``processes`` worker processes
    (default: one per core and one more, at most :data:`MAX_PROCESSES`: :func:`default_processes`;
    0 or 1: in this process), as a Spark
    deployment runs it in one Python worker per task slot: the Python and system calls of each clone
    then run on every core instead of one thread at a time. The workers start with the first such
    plan (~0.1 s) and serve the runner's later plans; each chunk is made durable on its own (one
    ``syncfs`` per file system per chunk). Where no process can be started, the copies run here."""
    return LocalRunner(threads, processes)
