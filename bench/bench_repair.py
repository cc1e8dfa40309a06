"""How long a lost disk takes to repair at volume, against copying the same bytes with ``cp -a``.

    .venv/bin/python bench/bench_repair.py [--tables 5 --days 32 --buckets 32] [--dir DIR] [--threads 4]
                                           [--profile FILE]  (cProfile of the repair; --threads 1 to see the copies)

Builds one group of ``tables`` x ``days`` daily partitions x ``buckets`` buckets x 2 replicas on 4
backends (5 x 32 x 32 x 2 = 10,240 replicas): the catalog rows in bulk (bench/bench_catalog.py's
builder, the rows the write path records) and the files for real, most of them small (2-48 KiB)
and about one bucket in 97 large (4-16 MiB), each replica's bytes written once per backend. Then:

1. the baseline: ``cp -a`` of the backend that will be lost (its whole root, the same files and
   bytes the repair copies back) to a folder on the same disk, then ``sync``;
2. that backend's root is deleted; timed from here: the probe (jobs/health.py: the identity
   marker is gone, the backend is down), the balance run (jobs/balance.py with the in-process
   runner ``jobs/runners.py: local_runner``, the clone job's own task function on threads: what
   ``colocate balance --runner local`` and a control plane without Spark run; the Spark clone job
   runs the same function on executors) until the group is stable again (``Health.check_group``).

Printed: files/s and MB/s of both, their ratio, their CPU (on a shared machine the fairer judge), the catalog's share of the repair (the time inside
the catalog's transactions, ``Catalog.tx``, against the whole), and the progress the CLI's
``colocate jobs list`` and the page's job rows show while it runs (percent done, time left: both
read ``jobs.balance.job_progress``), sampled every ``--poll`` seconds from a second catalog
handle, as an operator's terminal would.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_catalog  # noqa: E402  (its bulk builder; patched below to write real files)

BACKENDS = 4
LOST = f"be{BACKENDS}"


def _size(table: int, day: int, bucket: int, rng: random.Random) -> int:
    if (table * 31 + day * 17 + bucket * 7) % 97 == 0:
        return rng.randint(4 << 20, 16 << 20)
    return rng.randint(2 << 10, 48 << 10)


def real_report(plan, table: int, day: int):
    """:func:`bench_catalog.fake_report` with real files: one parquet-named file per bucket, its
    bytes written to every replica's directory, sizes and checksums as the catalog records them."""
    from airflow_colocate.core.contract import ReplicaReport, WriteReport
    from airflow_colocate.storage import copy as copy_mod
    from airflow_colocate.storage import fs, layout

    replicas = []
    for b in plan.buckets:
        rng = random.Random(hash((table, day, b.bucket_seq)))
        size = _size(table, day, b.bucket_seq, rng)
        data = rng.randbytes(size)
        name = layout.bucket_file_name(f"w{table}-{day}", b.bucket_seq)
        checksum = copy_mod.replica_checksum([(name, hashlib.sha256(data).hexdigest())])
        for r in b.replicas:
            folder = Path(fs.local_path(r.path))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        rows = max(1, size // 40)
        replicas += [ReplicaReport(b.bucket_seq, r.backend_id, r.path, [name], rows, size, checksum, {name: size})
                     for r in b.replicas]
    return WriteReport(job_id=plan.job_id, table=plan.table, partition_value=plan.partition_value, version=plan.version,
                       source_rows=sum(r.rows for r in replicas) // 2, replicas=replicas, seconds=0.0,
                       spark_version="bench")


def marked_setup(url: str, shape, root: Path):
    """bench_catalog.setup, but each backend added as an operator does (``add_backend``: the root
    checked and its identity marker written), so the probe can tell a lost disk."""
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.backends import add_backend

    clock = bench_catalog.Clock(bench_catalog.START - timedelta(days=1))
    cat = Catalog(url, actor="bench", clock=clock)
    cat.init()
    for i in range(1, shape.backends + 1):
        folder = root / "backends" / f"be{i}"
        folder.mkdir(parents=True, exist_ok=True)
        add_backend(cat, folder.as_uri(), name=f"be{i}")
    for t in range(shape.tables):
        cat.tables.create(f"t{t}", bench_catalog.COLUMNS, ["id"], bucket_num=shape.buckets,
                          replication_num=shape.replicas, partition_cols=["dt"], colocate_with=bench_catalog.GROUP)
    return cat, clock


def tree_stats(path: Path) -> tuple[int, int]:
    files = size = 0
    for top, _, names in os.walk(path):
        for n in names:
            files += 1
            size += os.lstat(os.path.join(top, n)).st_size
    return files, size


def children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sync() -> None:
    subprocess.run(["sync"], check=True)


class TxTimer:
    """Time spent inside the catalog's transactions (every repository goes through ``Catalog.tx``)."""

    def __init__(self, cat) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.by_call: dict[str, list[float]] = {}
        self._inner = cat.tx
        cat.tx = self

    def __call__(self, fn):
        started = time.perf_counter()
        try:
            return self._inner(fn)
        finally:
            took = time.perf_counter() - started
            self.seconds += took
            self.calls += 1
            name = getattr(fn, "__qualname__", "?").replace(".<locals>.run", "").replace(".<locals>", "")
            entry = self.by_call.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += took

    def top(self, n: int = 5) -> str:
        worst = sorted(self.by_call.items(), key=lambda kv: -kv[1][1])[:n]
        return ", ".join(f"{name} {secs:.2f}s/{calls}" for name, (calls, secs) in worst)


def poll_progress(url: str, stop: threading.Event, every: float, lines: list[str], t0: float) -> None:
    """What an operator sees while the repair runs: the CLI's Percent/EtaSeconds columns and the
    page's job row, from a catalog handle of its own."""
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.balance import job_progress
    from airflow_colocate.plugins.presenters import job_model

    cat = Catalog(url, actor="watcher")
    try:
        while not stop.wait(every):
            try:
                jobs = [j for j in cat.jobs.list(limit=5) if j.kind not in ("write", "gc")]
            except Exception:  # noqa: BLE001 - the writer holds the lock this instant
                continue
            for j in jobs[:1]:
                p = job_progress(j, cat.now())
                page = job_model(j)
                eta = "-" if p["eta_seconds"] is None else f"{p['eta_seconds']:.0f}s"
                pct = "-" if p["percent"] is None else f"{p['percent']:.0f}%"
                done = "-" if page["done_fraction"] is None else f"{page['done_fraction'] * 100:.0f}%"
                lines.append(f"  t={time.perf_counter() - t0:5.1f}s  job {j.id} {j.kind} step {j.step}: "
                             f"CLI Percent {pct} EtaSeconds {eta} | page {done}, "
                             f"eta {page['eta_seconds'] if page['eta_seconds'] is None else round(page['eta_seconds'])}s "
                             f"({p['copied_bytes'] / 1e6:.0f} of {p['planned_bytes'] / 1e6:.0f} MB)")
    finally:
        cat.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=5)
    ap.add_argument("--days", type=int, default=32)
    ap.add_argument("--buckets", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="local_runner threads (default: the clone job's)")
    ap.add_argument("--poll", type=float, default=1.0)
    ap.add_argument("--dir", help="where the lake goes (default: a temporary folder under /tmp)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the repair (probe -> stable) into FILE (pstats)")
    args = ap.parse_args()

    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.balance import BalanceOptions, Balancer
    from airflow_colocate.jobs.health import probe_backends
    from airflow_colocate.jobs.runners import local_runner

    base = Path(tempfile.mkdtemp(prefix="bench-repair-", dir=args.dir))
    shape = bench_catalog.Shape(tables=args.tables, days=args.days, buckets=args.buckets, replicas=2, backends=BACKENDS)
    url = f"sqlite:///{base / 'catalog.db'}"
    try:
        t = time.perf_counter()
        bench_catalog.fake_report = real_report
        bench_catalog.setup = marked_setup
        bench_catalog.build_bulk(url, shape, base, chunk_days=8)
        sync()
        lost = base / "backends" / LOST
        files, size = tree_stats(lost)
        print(f"lake: {shape.replica_rows:,} replicas of {shape.tables} tables x {shape.days} days x {shape.buckets} "
              f"buckets x 2 on {BACKENDS} backends, built in {time.perf_counter() - t:.0f}s; {LOST} holds {files:,} "
              f"files, {size / 1e6:.0f} MB")

        baseline = base / "cp-baseline"
        t, cpu = time.perf_counter(), children_cpu()
        subprocess.run(["cp", "-a", str(lost), str(baseline)], check=True)
        sync()
        cp_s, cp_cpu = time.perf_counter() - t, children_cpu() - cpu
        shutil.rmtree(baseline)
        sync()

        from airflow_colocate.jobs import metrics

        metrics._stats()  # Airflow's Stats, set up once per process (seconds of imports; a task runner has it)
        cat = Catalog(url, actor="bench")
        timer = TxTimer(cat)
        shutil.rmtree(lost)  # the disk is gone
        lines: list[str] = []
        stop = threading.Event()
        prof = None
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0, cpu0 = time.perf_counter(), time.process_time()
        watcher = threading.Thread(target=poll_progress, args=(url, stop, args.poll, lines, t0), daemon=True)
        watcher.start()
        results = probe_backends(cat, timeout=30, relocate_delay=timedelta(0), sample=0)
        probe_s = time.perf_counter() - t0
        down = [r.backend.name for r in results if not r.ok]
        inner = local_runner(args.threads)
        copy_s = [0.0]

        def runner(plan):
            started = time.perf_counter()
            try:
                return inner(plan)
            finally:
                copy_s[0] += time.perf_counter() - started

        at_stable = {}

        def on_step(step, job_id):  # "finished": the map is switched and the group marked stable
            if step == "finished" and "t" not in at_stable:
                at_stable.update(t=time.perf_counter(), cpu=time.process_time() - cpu0, catalog=timer.seconds, copies=copy_s[0],
                                 top=timer.top(8), calls=timer.calls)

        summary = Balancer(cat, runner,
                           BalanceOptions(relocate_delay=timedelta(0), grace=timedelta(0), max_rounds=8),
                           work_dir=base / "runs", echo=lambda line: None, on_step=on_step).run()
        total_s = time.perf_counter() - t0  # with the drop of the lost backend's replica rows
        if prof is not None:
            prof.disable()
            prof.dump_stats(args.profile)
        balance_s = at_stable["t"] - t0 - probe_s
        health = cat.health.check_group(bench_catalog.GROUP)
        repair_s = at_stable["t"] - t0
        stop.set()
        watcher.join()
        copied = sum(j.bytes for j in summary["jobs"])
        cloned = sum(j.cloned for j in summary["jobs"])
        print(f"probe: {', '.join(down) or 'nothing'} down in {probe_s:.1f}s; balance until stable: "
              f"{', '.join(f'{j.kind} {j.state} ({j.cloned:,} clones)' for j in summary['jobs'])} in {balance_s:.1f}s; "
              f"group {'stable' if health.stable else 'UNSTABLE: ' + str(health.reason)}")
        print("progress while it ran (sampled every %.1fs):" % args.poll)
        shown = lines if len(lines) <= 12 else lines[:: max(1, len(lines) // 12)]
        for line in shown:
            print(line)
        cp_rate, rep_rate = size / cp_s, copied / repair_s
        print()
        print(f"| run | files | MB | seconds | files/s | MB/s |")
        print(f"| --- | ---: | ---: | ---: | ---: | ---: |")
        print(f"| cp -a + sync | {files:,} | {size / 1e6:.0f} | {cp_s:.1f} | {files / cp_s:,.0f} | {cp_rate / 1e6:.0f} |")
        print(f"| repair (probe → stable) | {cloned:,} | {copied / 1e6:.0f} | {repair_s:.1f} | {cloned / repair_s:,.0f} | "
              f"{rep_rate / 1e6:.0f} |")
        print(f"repair / cp throughput: {rep_rate / cp_rate:.2f}x (target >= 0.8x); catalog: {at_stable['catalog']:.1f}s "
              f"= {100 * at_stable['catalog'] / repair_s:.1f}% of the repair (target <= 10%)")
        cp_ns, rep_ns = cp_cpu / size * 1e9, at_stable["cpu"] / copied * 1e9
        print(f"CPU (user + system, the fair judge on a shared machine): cp -a + sync {cp_cpu:.2f}s = {cp_ns:.1f} ns/byte; "
              f"the repair (this process) {at_stable['cpu']:.2f}s = {rep_ns:.1f} ns/byte: {cp_ns / rep_ns:.2f}x cp's bytes "
              f"per CPU second (sync's write-back runs in kernel threads on both sides and is not counted)")
        print(f"inside the repair: copies (clone tasks) {at_stable['copies']:.1f}s; catalog by call "
              f"({at_stable['calls']} transactions): {at_stable['top']}")
        print(f"after it (not counted): dropping the lost replicas' rows and the last checks {total_s - repair_s:.1f}s")
        cat.dispose()
        if not health.stable:
            sys.exit("the group did not become stable")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")


if __name__ == "__main__":
    main()
