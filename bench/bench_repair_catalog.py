"""The catalog's part of a lost disk's repair, phase by phase, without the copies.

    .venv/bin/python bench/bench_repair_catalog.py [--tables 5 --days 32 --buckets 32] [--rounds 5]

``bench_repair.py`` times the whole repair (probe -> stable) with real files; its catalog share is
the time inside ``Catalog.tx``. This bench isolates that share so it can be measured and grown
apart from the copies: the same lake (one group of ``tables`` x ``days`` x ``buckets`` x 2
replicas on 4 backends, catalog rows from bench_catalog's bulk builder, SQLite), the lost
backend's root deleted, then the same calls in the same order as ``bench_repair.py``: the probe
(``jobs.health.probe_backends``: the identity marker is gone, the backend is down, the groups are
checked), and ``Balancer.run`` with a runner that reports every clone copied at once (what the
clone job reports, without the bytes) until the balance job finishes and the group is stable.
Each round starts from a copy of the catalog taken before the first.

Printed per phase (best of the rounds, wall and this thread's CPU: on a shared machine the CPU is
the fairer judge): probe (the probe's own transactions), check (the stability checks the probe
triggers), plan (placement snapshot, job create/begin and the other small calls), clone_needs,
register (``register_clones``, one call per clone batch), switch, finish (the group's check; the
marks of what the map no longer names come after it, in ``close``, which is not counted: the group
is stable by then), and the total; the part on the repair's critical path (the local runner in
worker processes copies the next batches while one is registered, so of the registrations only
the last one counts; ``COLOCATE_OVERLAP_CLONE_BATCHES=0`` turns that off); then the time
Python's cyclic garbage collector took inside the transactions (a full collection walks every
object of the process: 100-200 ms here; the catalog pauses the collector while a transaction
runs, see ``catalog/session.py``).
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_catalog
from bench_repair import marked_setup
from bench_repair import snapshot_db as copy_db

PHASES = {"BalanceJobs.clone_needs": "clone_needs", "BalanceJobs.register_clones": "register",
          "BalanceJobs.switch_map": "switch", "BalanceJobs.finish": "finish", "Health.check_group": "check",
          "Health.check_groups.<lambda>": "check"}
ORDER = ("probe", "check", "plan", "clone_needs", "register", "switch", "finish")


class Phases:
    """Wall and thread CPU inside ``Catalog.tx``, by phase (the transaction's function name)."""

    def __init__(self, cat) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.default = "probe"
        self.gc_ms, self.gc_runs, self._inside, self._gc_start = 0.0, 0, False, 0.0
        self.last_register = (0.0, 0.0)  # (wall, CPU) of the last registration
        self._inner = cat.tx
        cat.tx = self
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict) -> None:
        if not self._inside:
            return
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_ms += (time.perf_counter() - self._gc_start) * 1000
            self.gc_runs += 1

    def close(self) -> None:
        gc.callbacks.remove(self._gc)

    def __call__(self, fn, **kw):
        wall, cpu = time.perf_counter(), time.thread_time()
        self._inside = True
        try:
            return self._inner(fn, **kw)
        finally:
            self._inside = False
            name = getattr(fn, "__qualname__", "?").replace(".<locals>.run", "").replace(".<locals>", "")
            phase = PHASES.get(name, self.default)
            self.wall[phase] += time.perf_counter() - wall
            self.cpu[phase] += time.thread_time() - cpu
            self.calls[phase] += 1
            if phase == "register":
                self.last_register = (time.perf_counter() - wall, time.thread_time() - cpu)


def instant_runner(plan):
    """Every clone of the plan reported copied, with the sizes and checksum it was asked for."""
    from airflow_colocate.core.contract import CloneReport, CloneResult

    copies = [CloneResult(t.key, t.partition_id, t.version, t.bucket_seq, t.backend_id, t.src_backend_id, t.dst, True,
                          t.rows, t.bytes, t.checksum, files=sorted(t.sizes), sizes=dict(t.sizes))
              for t in plan.copies]
    return CloneReport(plan.job_id, copies, [], 0.0, sum(c.bytes for c in copies), "bench")


def one_round(url: str, base: Path) -> tuple[Phases, int]:
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.balance import BalanceOptions, Balancer
    from airflow_colocate.jobs.health import probe_backends

    shutil.rmtree(base / "backends" / "be4", ignore_errors=True)  # the disk is gone
    cat = Catalog(url, actor="bench")
    phases = Phases(cat)
    probe_backends(cat, timeout=30, relocate_delay=timedelta(0), sample=0)
    phases.default = "plan"
    done: dict[str, dict] = {}

    def on_step(step, job_id):  # as bench_repair.py: the repair ends when the job has finished
        if step == "finished" and not done:
            done.update(wall=dict(phases.wall), cpu=dict(phases.cpu), calls=dict(phases.calls),
                        gc=(phases.gc_runs, phases.gc_ms), last=phases.last_register)

    summary = Balancer(cat, instant_runner, BalanceOptions(relocate_delay=timedelta(0), grace=timedelta(0), max_rounds=8),
                       work_dir=base / "runs", echo=lambda line: None, on_step=on_step).run()
    if not cat.health.check_group(bench_catalog.GROUP).stable or not done:
        sys.exit("the group did not become stable")
    phases.wall, phases.cpu, phases.calls = done["wall"], done["cpu"], done["calls"]
    phases.gc_runs, phases.gc_ms = done["gc"]
    phases.last_register = done["last"]
    phases.close()
    cat.dispose()
    (base / "backends" / "be4").mkdir()
    return phases, sum(j.cloned for j in summary["jobs"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=5)
    ap.add_argument("--days", type=int, default=32)
    ap.add_argument("--buckets", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.rounds < 1 or min(args.tables, args.days, args.buckets) < 1:
        sys.exit("--tables, --days, --buckets and --rounds must be at least 1")
    from airflow_colocate.jobs import metrics

    metrics._stats()  # Airflow's Stats, set up once per process (a task runner has it)
    base = Path(tempfile.mkdtemp(prefix="bench-repair-catalog-"))
    shape = bench_catalog.Shape(tables=args.tables, days=args.days, buckets=args.buckets, replicas=2, backends=4)
    db = base / "catalog.db"
    url = f"sqlite:///{db}"
    try:
        bench_catalog.setup = marked_setup
        bench_catalog.build_bulk(url, shape, base, chunk_days=8)
        copy_db(db, base / "before.db")
        rounds = []
        for _ in range(args.rounds):
            copy_db(base / "before.db", db)
            rounds.append(one_round(url, base))
        cloned = rounds[0][1]
        print(f"{shape.replica_rows:,} replicas ({args.tables} tables x {args.days} days x {args.buckets} buckets x 2), "
              f"{cloned:,} clones; catalog time of the repair, best of {args.rounds} rounds:")
        print("| phase | transactions | wall ms | CPU ms |")
        print("| --- | ---: | ---: | ---: |")
        for phase in ORDER:
            wall = min(p.wall.get(phase, 0.0) for p, _ in rounds)
            cpu = min(p.cpu.get(phase, 0.0) for p, _ in rounds)
            print(f"| {phase} | {rounds[0][0].calls.get(phase, 0)} | {wall * 1000:.0f} | {cpu * 1000:.0f} |")
        walls = sorted(sum(p.wall.values()) for p, _ in rounds)
        cpus = sorted(sum(p.cpu.values()) for p, _ in rounds)
        print(f"| total | {sum(rounds[0][0].calls.values())} | {walls[0] * 1000:.0f} (median {walls[len(walls) // 2] * 1000:.0f}) "
              f"| {cpus[0] * 1000:.0f} (median {cpus[len(cpus) // 2] * 1000:.0f}) |")
        # Balancer._clone_round registers batch k while batch k+1 copies: only the last batch's
        # registration waits for nothing but the catalog (when a batch's copies take longer than
        # the registration before them, as they do with real files)
        walls = sorted(sum(p.wall.values()) - p.wall.get("register", 0) + p.last_register[0] for p, _ in rounds)
        cpus = sorted(sum(p.cpu.values()) - p.cpu.get("register", 0) + p.last_register[1] for p, _ in rounds)
        print(f"on the repair's critical path (every phase, of the registrations the last one only): wall "
              f"{walls[0] * 1000:.0f} ms (median {walls[len(walls) // 2] * 1000:.0f}), CPU {cpus[0] * 1000:.0f} ms "
              f"(median {cpus[len(cpus) // 2] * 1000:.0f})")
        print("cyclic garbage collections inside the transactions, per round: "
              + ", ".join(f"{p.gc_runs} ({p.gc_ms:.0f} ms)" for p, _ in rounds))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
