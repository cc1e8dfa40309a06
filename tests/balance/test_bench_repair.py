"""bench/bench_repair.py at 1 % of its lake, as an operator runs it: issue 29's figures come from it,
and a bench that only runs by hand breaks unseen. Two rounds, so undoing a repair (the backends
from hard links, the catalog from its copy) is exercised too; a bucket in three large, so both
kinds of file are copied. The figures themselves are not judged here: speed is measured by the
bench and recorded in README's "Performance", never asserted in a test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_repair.py"


def run_bench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_bench_repair_repairs_a_lost_backend_twice_and_prints_its_figures(tmp_path):
    done = run_bench("--scale", "1", "--rounds", "2", "--large-every", "3", "--dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout

    lake = re.search(r"^lake: 128 replicas .* be4 holds (\d+) files", out, re.M)
    assert lake and int(lake.group(1)) > 0, out
    assert len(re.findall(r"^round \d: cp -a \+ sync .* repair .*x$", out, re.M)) == 2, out
    probe = re.search(r"^probe: be4 down in .*; balance until stable: relocate done \(([\d,]+) clones\) .*; group stable$",
                      out, re.M)
    assert probe and int(probe.group(1).replace(",", "")) > 0, out
    repaired = re.search(r"^\| repair \(probe → stable\) \| ([\d,]+) \| (\d+) \|", out, re.M)
    assert repaired and repaired.group(1) == probe.group(1) and int(repaired.group(2)) > 0, out  # MB copied
    assert re.search(r"^repair / cp throughput: [\d.]+x best against best, [\d.]+x median against median .*"
                     r"catalog [\d.]+s = [\d.]+% of the repair in transactions .* with no copy running", out, re.M), out
    # the lake, its snapshot and the baseline's copies are gone unless --keep
    assert list(tmp_path.iterdir()) == [], sorted(p.name for p in tmp_path.iterdir())


def test_bench_repair_refuses_a_mix_without_large_buckets(tmp_path):
    done = run_bench("--large-every", "0", "--dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode != 0
    assert "--large-every must be at least 1 (one bucket in N is large), got 0" in done.stderr
    assert list(tmp_path.iterdir()) == []
