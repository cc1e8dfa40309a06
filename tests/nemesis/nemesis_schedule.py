"""A nemesis schedule: what each worker does at each step and which faults strike while it does,
drawn from one seed, kept as JSON so a failing one can be replayed and shrunk.

Pure: no I/O but :func:`save`/:func:`load`. A step is ``{"ops": [...], "faults": [...]}``: its
ops run concurrently (lane 0 in the harness's Spark session, the others as processes of their own
that a ``kill_after`` fault SIGKILLs), its faults strike ``at`` seconds into the step. Everything a
step does is in its JSON, so replaying a schedule does not depend on the seed any more: shrinking
removes steps and the remaining ones stay exactly what they were."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

TABLES = ("a", "b")  # both in group g; b has a retention the 'expire' op applies
DAYS = tuple(f"2026-10-{d:02d}" for d in range(20, 28))
IMPORT_DAYS = tuple(f"2026-10-{d:02d}" for d in range(28, 32))
BACKENDS = ("be1", "be2", "be3", "be4")  # be4 is a size-limited tmpfs (ENOSPC)

# (kind, weight): Spark lane ops run in the harness's session; process ops can be killed.
SPARK_OPS = (("spark_write", 3), ("read", 4), ("join", 3), ("import", 1), ("verify", 1))
PROCESS_OPS = (("write", 8), ("drop", 2), ("recover", 2), ("expire", 1), ("alter", 1), ("balance", 4),
               ("decommission", 1), ("gc", 2), ("probe", 2))
# Fault kinds the schedule draws; the harness's FAULTS table maps each to what it does, and
# 'pg_restart' only where the catalog is PostgreSQL. A new kind is an entry there and a weight here
# (or, to keep the schedules drawn before it, a stream of its own: 'stall', 'link').
FAULT_KINDS = (("kill", 5), ("down", 2), ("corrupt", 3), ("enospc", 2), ("catalog_full", 1), ("pg_restart", 1))
ONLY_ON = {"pg_restart": True, "catalog_full": False}  # kind -> the catalog it needs (PostgreSQL or not)
# A stalled backend (reads wait STALL_DELAYS seconds each) is drawn from a stream of its own, so the
# schedules drawn before it existed (the kept ones, CI's seeds) keep their ops and other faults.
STALL_CHANCE = 0.25
STALL_DELAYS = (0.02, 0.1, 0.3)
# The link between the worker processes and the catalog's PostgreSQL taken down (or every packet
# lost) for a step or two: PostgreSQL schedules only (a SQLite catalog is a local file), from a
# stream of its own for the same reason as the stall.
LINK_CHANCE = 0.25


def _pick(rng: random.Random, weighted) -> str:
    kinds, weights = zip(*weighted)
    return rng.choices(kinds, weights)[0]


def _op(rng: random.Random, kind: str, wseeds: Iterator[int]) -> dict:
    op: dict = {"kind": kind}
    if kind in ("write", "spark_write"):
        op |= {"table": rng.choice(TABLES), "dt": rng.choice(DAYS), "wseed": next(wseeds)}
    elif kind == "import":
        op |= {"table": rng.choice(TABLES), "dts": sorted(rng.sample(IMPORT_DAYS, rng.randint(1, 2))),
               "wseed": next(wseeds)}
    elif kind in ("drop", "recover"):
        op |= {"table": rng.choice(TABLES), "dt": rng.choice(DAYS)}
    elif kind == "read":
        op |= {"table": rng.choice(TABLES)}
    elif kind == "alter":
        op |= {"table": rng.choice(TABLES), "column": f"x{rng.randint(1, 3)}"}
    elif kind == "decommission":
        op |= {"backend": rng.choice(BACKENDS), "cancel": rng.random() < 0.5}
    return op


def generate(seed: int, steps: int, *, workers: int = 3, postgres: bool = False) -> dict:
    """``steps`` steps of ``workers`` concurrent ops each, with faults, all drawn from ``seed``."""
    rng, stalls, links = random.Random(seed), random.Random(f"stall-{seed}"), random.Random(f"link-{seed}")
    counter = iter(range(seed * 1000 + 1, seed * 1000 + 100_000))
    kinds = [(k, w) for k, w in FAULT_KINDS if ONLY_ON.get(k, postgres) == postgres]
    out = []
    for _ in range(steps):
        ops = [_op(rng, _pick(rng, SPARK_OPS), counter)]
        ops += [_op(rng, _pick(rng, PROCESS_OPS), counter) for _ in range(workers - 1)]
        faults = []
        for _ in range(rng.choice((0, 1, 1, 2))):
            kind = _pick(rng, kinds)
            fault: dict = {"kind": kind, "at": round(rng.uniform(0.0, 2.5), 2)}
            if kind == "kill":  # a process spends its first ~0.5 s importing: strike after that
                fault |= {"lane": rng.randint(1, workers - 1), "at": round(rng.uniform(0.4, 3.0), 2)}
            elif kind == "down":
                fault |= {"backend": rng.choice(BACKENDS[:3]), "steps": rng.randint(1, 2)}
            elif kind == "corrupt":
                fault |= {"how": rng.choice(("flip", "truncate", "delete")), "pick": rng.randrange(1 << 30)}
            elif kind in ("enospc", "catalog_full"):
                fault["steps"] = rng.randint(1, 2)
            faults.append(fault)
        if stalls.random() < STALL_CHANCE:
            faults.append({"kind": "stall", "at": round(stalls.uniform(0.0, 2.5), 2), "backend": stalls.choice(BACKENDS[:3]),
                           "delay": stalls.choice(STALL_DELAYS), "steps": stalls.randint(1, 2)})
        if postgres and links.random() < LINK_CHANCE:
            faults.append({"kind": "link", "at": round(links.uniform(0.0, 2.5), 2), "how": links.choice(("down", "loss")),
                           "steps": links.randint(1, 2)})
        out.append({"ops": ops, "faults": faults})
    return {"seed": seed, "postgres": postgres, "steps": out}


def shrink(schedule: dict, fails, budget: int = 1000) -> dict:
    """Delta debugging (ddmin) over the steps: the smallest sub-list of steps found for which
    ``fails(schedule)`` still holds, within ``budget`` tries. Each try replays a whole schedule,
    so this costs about n·log(n) runs at worst; the first try that fails wins at each size."""
    steps = list(schedule["steps"])
    n = 2
    tries = 0
    while len(steps) >= 2 and tries < budget:
        size = max(1, len(steps) // n)
        chunks = [steps[i:i + size] for i in range(0, len(steps), size)]
        reduced = False
        for i in range(len(chunks)):
            rest = [s for j, c in enumerate(chunks) if j != i for s in c]
            if tries >= budget:
                break
            tries += 1
            if rest and fails(dict(schedule, steps=rest)):
                steps, n, reduced = rest, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(steps):
                break
            n = min(len(steps), n * 2)
    return dict(schedule, steps=steps)


def save(schedule: dict, path: Path) -> Path:
    path.write_text(json.dumps(schedule, indent=1) + "\n")
    return path


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())
