"""How long a lost S3 backend takes to repair, against copying the same objects with boto3's
server-side copy at the same concurrency, on a real S3 API (SeaweedFS, as in the tests).

    .venv/bin/python bench/bench_s3_repair.py [--tables 5 --days 32 --buckets 32 | --scale PCT] [--threads N]

Builds one group of ``tables`` x ``days`` partitions x ``buckets`` buckets x 2 replicas on 3
backends under prefixes of one bucket (5 x 32 x 32 x 2 = 10,240 replicas by default), written as
the write job places them (each object with the SHA-256 the store keeps). Then, side by side:

1. the baseline: every object of the backend about to be lost, copied by the server to a scratch
   prefix with boto3 ``copy_object`` on ``--threads`` threads (the same number the repair's
   runner copies on), then deleted; ``--baseline-runs`` times, the median taken;
2. the same copies each followed by the HEAD that reads the copy's SHA-256 (the proof a repair
   makes on a store that does not put it in the copy's answer, as SeaweedFS);
3. the backend's prefix is deleted; timed from here: the probe (the identity marker is gone, the
   backend is down) and the balance run (the local runner, what ``colocate balance --runner
   local`` runs) until the group is stable again. The catalog's share is the time inside its
   transactions (bench_repair.TxTimer). Each replica's files carry the ETags their write
   recorded, so a copy is proven by its answer (``CopySourceIfMatch``: storage/s3.py).

Printed: objects/s of each, the repair's ratio to both (target: repair <= 1.25x the first
baseline's wall time; the repair is the balance run, due 30 minutes after the probe that found the
loss, whose time is printed beside it and in a second ratio), the catalog's share, the repair's phases (the probe, the clone plans' runs
with the sum of their copies' own seconds over the threads, the rest of the balance), the S3
requests the repair made through boto3 by operation, and that every row is back.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for extra in (REPO, REPO / "bench", REPO / "tests", REPO / "tests" / "balance", REPO / "tests" / "object_stores"):
    sys.path.insert(0, str(extra))

from bench_repair import TxTimer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=5)
    ap.add_argument("--days", type=int, default=32)
    ap.add_argument("--buckets", type=int, default=32)
    ap.add_argument("--scale", type=float, help="percent of the default lake (scales days)")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--baseline-runs", type=int, default=3, help="runs of the plain copies; their median is the baseline")
    args = ap.parse_args()
    if args.scale:
        args.days = max(1, round(args.days * args.scale / 100))

    from s3server import start_s3

    work = Path(tempfile.mkdtemp(prefix="bench-s3-repair-"))
    server = start_s3(work)
    os.environ.update(server.env())
    try:
        run(args, work, server)
    finally:
        server.stop()


def run(args, work: Path, server) -> None:
    from balance_lake import Clock, rows
    from s3_lake import S3Lake

    from datetime import timedelta

    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.balance import BalanceOptions, Balancer
    from airflow_colocate.jobs.health import probe_backends
    from airflow_colocate.jobs.runners import local_runner
    from airflow_colocate.storage import fs, s3

    clock = Clock()
    cat = Catalog(f"sqlite:///{work / 'catalog.db'}", actor="bench", clock=clock)
    cat.init()
    lake = S3Lake(cat, clock, work)
    lake.server = server
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    started = time.perf_counter()
    for t in range(args.tables):
        lake.create(f"t{t}", buckets=args.buckets)
        for d in range(args.days):
            lake.write(f"t{t}", f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}", range(d * 1000 + t, d * 1000 + t + 40))
    replicas = args.tables * args.days * args.buckets * 2
    print(f"lake: {replicas} replicas ({args.tables} tables x {args.days} days x {args.buckets} buckets x 2) "
          f"written in {time.perf_counter() - started:.0f}s")
    before = {f"t{t}": rows(cat, f"default.t{t}") for t in range(args.tables)}

    lost = cat.backends.get("be2")
    client = server.client()
    bucket, prefix = s3.bucket_key(lost.root_uri)
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
            for o in page.get("Contents", []) if o["Key"].endswith(".parquet")]
    timings = []
    for _ in range(args.baseline_runs):  # the median of a few: one run of a few seconds varies by 10 %
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(lambda k: client.copy_object(Bucket=bucket, Key=f"scratch/{k}",
                                                       CopySource={"Bucket": bucket, "Key": k}), keys))
        timings.append(time.perf_counter() - t0)
        fs.delete_tree(f"s3a://{bucket}/scratch")
    baseline = sorted(timings)[len(timings) // 2]
    print(f"baseline: boto3 copy_object of be2's {len(keys)} objects on {args.threads} threads: {baseline:.1f}s "
          f"({len(keys) / baseline:.0f} objects/s; median of {', '.join(f'{t:.1f}s' for t in timings)})")

    def copy_and_head(key):  # the requests a repair must make on a store that does not answer a copy with its SHA-256
        client.copy_object(Bucket=bucket, Key=f"scratch/{key}", CopySource={"Bucket": bucket, "Key": key},
                           ChecksumAlgorithm="SHA256")
        return client.head_object(Bucket=bucket, Key=f"scratch/{key}", ChecksumMode="ENABLED").get("ChecksumSHA256")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        told = list(pool.map(copy_and_head, keys))
    with_head = time.perf_counter() - t0
    fs.delete_tree(f"s3a://{bucket}/scratch")
    print(f"baseline with the proof: copy_object + head_object of the same objects: {with_head:.1f}s "
          f"({len(keys) / with_head:.0f} objects/s; {sum(1 for t in told if t)} with a SHA-256)")

    from airflow_colocate.jobs import metrics

    metrics._stats()  # Airflow's StatsD client, imported once per process (an Airflow worker has it)
    fs.delete_tree(lost.root_uri)
    lake_runner = local_runner(threads=args.threads, processes=0)  # S3's copies wait on the server: threads suffice
    runs: list[tuple[float, int]] = []  # per clone plan: wall seconds, copies

    class TimedRunner(type(lake_runner)):  # the same runner, its plans timed
        def __call__(self, plan):
            started = time.perf_counter()
            report = super().__call__(plan)
            runs.append((time.perf_counter() - started, len(report.copies)))
            return report

    lake_runner.__class__ = TimedRunner
    requests: dict[str, int] = {}
    counting = threading.Lock()  # the copies' threads call it at once

    def count(event_name, **_):
        op = event_name.rsplit(".", 1)[1]
        with counting:
            requests[op] = requests.get(op, 0) + 1

    s3._client().meta.events.register("before-parameter-build.s3", count)
    timer = TxTimer(cat)
    t0 = time.perf_counter()
    probe_backends(cat, timeout=30)
    probed = time.perf_counter() - t0
    clock.advance(minutes=31)
    Balancer(cat, lake_runner, BalanceOptions(grace=timedelta(0)), work_dir=work / "runs", echo=lambda _: None).run()
    repair = time.perf_counter() - t0
    s3._client().meta.events.unregister("before-parameter-build.s3", count)
    assert cat.health.check_group("g").stable, "the group is not stable after the repair"
    after = {f"t{t}": rows(cat, f"default.t{t}") for t in range(args.tables)}
    assert after == before, "rows differ after the repair"
    print(f"repair: probe + balance until stable: {repair:.1f}s ({len(keys) / repair:.0f} objects/s); "
          f"catalog {timer.seconds:.1f}s in {timer.calls} transactions ({100 * timer.seconds / repair:.0f}% of the repair)")
    copies_wall = sum(r[0] for r in runs)
    print(f"phases: probe {probed:.1f}s; {len(runs)} clone plan(s) {copies_wall:.1f}s for {sum(r[1] for r in runs)} "
          f"clones ({', '.join(f'{r[0]:.1f}s' for r in runs)}); "
          f"the rest of the balance {repair - probed - copies_wall:.1f}s; boto3 requests: "
          + ", ".join(f"{op} {n}" for op, n in sorted(requests.items())))
    # The probe found the loss 30 minutes (the relocate delay) before the repair was due: the repair
    # itself is the balance run; the probe's share is printed beside it.
    balance = repair - probed
    print(f"ratio: repair (the balance run, {balance:.1f}s) / server-side copy = {balance / baseline:.2f}x "
          f"(target <= 1.25x); with the probe that found the loss = {repair / baseline:.2f}x; "
          f"repair / copy + HEAD = {balance / with_head:.2f}x; every row is back")


if __name__ == "__main__":
    main()
