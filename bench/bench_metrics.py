"""What one scrape of ``/api/colocate/metrics`` costs the catalog on a 3-year lake.

    .venv/bin/python bench/bench_metrics.py [--scale 100] [--db PATH] [--rounds 7]

Builds (once: an existing ``--db`` file is reused) bench/bench_catalog.py's catalog at ``--scale``
percent (at 100%: 10 tables x 1,095 daily partitions x 64 buckets x 3 replicas, about 2.1 million
replica rows, on SQLite), then times ``catalog.metrics.read()`` plus the Prometheus rendering in
a fresh child process per round (after imports, as bench_catalog.py times its operations): first
with every group stable, then with a backend marked down and the group unstable (the event log is
read for when it became unstable). Prints the median and every round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def child(url: str) -> None:
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.plugins.prometheus import render

    started = time.perf_counter()
    cat = Catalog(url, actor="bench")
    text = render(cat.metrics.read())
    seconds = time.perf_counter() - started
    cat.dispose()
    print(json.dumps({"seconds": seconds, "lines": len(text.splitlines())}))


def rounds(url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        run = subprocess.run([sys.executable, __file__, "--child", url], capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise SystemExit(run.stderr[-3000:])
        out.append(json.loads(run.stdout.strip().splitlines()[-1])["seconds"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=100.0, help="share of 1,095 days, in percent")
    ap.add_argument("--db", default="/tmp/colocate-bench-metrics/catalog.db", help="the SQLite file (reused if present)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    import bench_catalog

    from airflow_colocate.catalog import Catalog

    db = Path(a.db)
    url = f"sqlite:///{db}"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        started = time.time()
        bench_catalog.build_bulk(url, bench_catalog.Shape().at(a.scale), db.parent / "lake")
        print(f"built the {a.scale:g}% catalog in {time.time() - started:.0f}s", flush=True)
    cat = Catalog(url, actor="bench")
    cat.init()  # the current schema (its indexes)
    cat.backends.set_state("be1", "alive", reason="bench")
    cat.health.check_groups()
    for label in ("every group stable", "be1 down, the group unstable"):
        if label.startswith("be1"):
            cat.backends.set_state("be1", "down", reason="bench")
            assert not all(g.stable for g in cat.health.check_groups())
        got = rounds(url, a.rounds)
        print(f"metrics ({label}): median {statistics.median(got):.3f}s; rounds {[round(x, 3) for x in got]}", flush=True)
    cat.backends.set_state("be1", "alive", reason="bench")
    cat.health.check_groups()
    cat.dispose()


if __name__ == "__main__":
    main()
