"""What must be true, worked out from the schedule and the operations' outcomes alone, never from
the product's read path: the rows of a write are a function of (table, day, write seed), and each
(table, day) has a set of seeds it may show (``None``: no visible partition).

An acknowledged write narrows the set to its seed; a failed one leaves it alone (a failed operation
changes nothing visible); a killed one, whose commit may or may not have happened, adds its seed.
Each observation of the lake collapses a set to what was seen, so an uncertainty never outlives
the next check. Every row names its write (``v = table:day:seed:id``), which is what lets a read
tell an old version's row, a dropped one's or an uncommitted one's from the right one."""

from __future__ import annotations

import random
from collections import defaultdict

from nemesis_schedule import DAYS, IMPORT_DAYS, TABLES

RETENTION_DAYS = 5
EXPIRE_TODAY = "2026-10-29"  # with 5 days, b's days before 2026-10-24 expire


def rows(table: str, dt: str, seed: int) -> set[tuple[int, str, str]]:
    """The rows write ``seed`` of ``table``/``dt`` holds: (id, v, dt)."""
    rng = random.Random(f"{table}/{dt}/{seed}")
    return {(i, f"{table}:{dt}:{seed}:{i}", dt) for i in rng.sample(range(400), rng.randint(40, 120))}


def expired_days() -> list[str]:
    from datetime import date, timedelta

    cutoff = date.fromisoformat(EXPIRE_TODAY) - timedelta(days=RETENTION_DAYS)
    return [d for d in DAYS + IMPORT_DAYS if date.fromisoformat(d) < cutoff]


class Model:
    def __init__(self) -> None:
        self.live: dict[tuple[str, str], set] = {(t, d): {None} for t in TABLES for d in DAYS + IMPORT_DAYS}
        self.history: dict[tuple[str, str], set] = defaultdict(set)  # every seed a key may have had

    def effects(self, op: dict) -> dict[tuple[str, str], set]:
        """What ``op``, had it succeeded, may make each key it touches show."""
        kind = op["kind"]
        if kind in ("write", "spark_write"):
            return {(op["table"], op["dt"]): {op["wseed"]}}
        if kind == "import":
            return {(op["table"], d): {op["wseed"]} for d in op["dts"]}
        if kind == "drop":
            return {(op["table"], op["dt"]): {None}}
        if kind == "recover":
            key = (op["table"], op["dt"])
            return {key: set(self.history[key]) | self.live[key]}  # the binned version: one of its past ones
        if kind == "expire":
            return {("b", d): {None} for d in expired_days()}
        return {}

    def during(self, ops: list[dict]) -> dict[tuple[str, str], set]:
        """What a read running alongside ``ops`` may see for each key."""
        out = {k: set(v) for k, v in self.live.items()}
        for op in ops:
            for key, seeds in self.effects(op).items():
                out[key] |= seeds
        return out

    def apply(self, results: list[tuple[dict, str]]) -> None:
        """Fold a step's ops and outcomes ('ok', 'failed', 'killed') into the model. A key two ops
        of the step touched may end in either's state: the order of their commits is unknown."""
        touched: dict[tuple[str, str], int] = defaultdict(int)
        effects = [(op, outcome, self.effects(op)) for op, outcome in results]
        for _, _, eff in effects:
            for key in eff:
                touched[key] += 1
        new = {k: set(v) for k, v in self.live.items()}
        for op, outcome, eff in effects:
            for key, seeds in eff.items():
                if outcome == "failed" and not op["kind"] == "import":
                    continue
                if outcome == "ok" and touched[key] == 1 and len(seeds) == 1 and op["kind"] != "recover":
                    new[key] = set(seeds)
                elif outcome == "ok" and touched[key] == 1 and op["kind"] == "recover":
                    new[key] = set(seeds) - {None} or set(seeds)
                else:
                    new[key] |= seeds
        for key in new:
            self.history[key] |= {s for s in new[key] | self.live[key] if s is not None}
        self.live = new

    def observe(self, key: tuple[str, str], seed) -> str | None:
        """Collapse ``key`` to what the lake shows; a violation's one line if the model forbids it."""
        allowed = self.live[key]
        if seed not in allowed:
            return f"{key[0]}/{key[1]} shows write {seed}, the model allows only {sorted(allowed, key=str)}"
        self.live[key] = {seed}
        return None

    def expected(self, key: tuple[str, str]):
        """The one seed a key must show when the model is certain, else None."""
        seeds = self.live[key]
        return next(iter(seeds)) if len(seeds) == 1 else None
