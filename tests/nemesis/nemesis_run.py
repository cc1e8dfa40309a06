"""Run nemesis schedules: one (a seed, or a JSON schedule) or many for a while, each in a fresh
lake, and print what ran, what struck and what broke.

    python tests/nemesis/nemesis_run.py --seed 7 --steps 12            # replay one exactly
    python tests/nemesis/nemesis_run.py --duration 1800                 # successive seeds, 30 minutes
    python tests/nemesis/nemesis_run.py --schedule tests/nemesis/schedules/x.json

``make nemesis`` calls it. A schedule that breaks an invariant is shrunk (nemesis_schedule.shrink)
and written under tests/nemesis/schedules/, where test_nemesis.py replays it as a regression test."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from nemesis_checks import check_drift, check_files, check_join, check_lake, check_read  # noqa: E402
from nemesis_model import Model  # noqa: E402
from nemesis_schedule import generate, load, save, shrink  # noqa: E402
from nemesis_world import FAULTS, World  # noqa: E402

OP_TIMEOUT = 240.0
SHRINK_TRIES = 16  # replays a shrink may spend (a 12-step replay takes one to three minutes)


class Tally:
    """What a run did: schedules, ops by kind and outcome, faults by kind, checks, violations."""

    def __init__(self) -> None:
        self.schedules = 0
        self.ops: Counter = Counter()
        self.faults: Counter = Counter()
        self.checks = 0
        self.violations: list[str] = []

    def add(self, other: "Tally") -> None:
        self.schedules += other.schedules
        self.ops.update(other.ops)
        self.faults.update(other.faults)
        self.checks += other.checks
        self.violations += other.violations

    def lines(self) -> list[str]:
        total = sum(self.ops.values())
        kinds = Counter()
        for (kind, _), n in self.ops.items():
            kinds[kind] += n
        outcomes = Counter()
        for (_, outcome), n in self.ops.items():
            outcomes[outcome] += n
        return [
            f"schedules run: {self.schedules}",
            f"operations: {total} ({', '.join(f'{k} {n}' for k, n in sorted(outcomes.items()))}): "
            + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
            "faults injected: " + (", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"),
            f"invariant checks: {self.checks}",
            f"violations: {len(self.violations)}",
        ] + [f"  {v}" for v in self.violations[:20]]


def _checked(tally: Tally, found: list[str], where: str) -> None:
    tally.checks += 1
    tally.violations += [f"{where}: {v}" for v in found]


def run_step(world: World, model: Model, step: dict, index: int, tally: Tally, echo) -> None:
    ops, faults = step["ops"], sorted(step["faults"], key=lambda f: f["at"])
    allowed = model.during(ops)
    outcomes: list[str | None] = [None] * len(ops)
    seen: dict = {}
    killed: set[int] = set()
    errors: dict[int, str] = {}

    def spark_lane(op):
        try:
            seen.update(world.spark_op(op) or {})
            outcomes[0] = "ok"
        except Exception as exc:  # a refused or failed op is an outcome, judged by the model
            outcomes[0], errors[0] = "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"

    threads = [threading.Thread(target=spark_lane, args=(ops[0],), daemon=True)]
    procs = {lane: world.start(lane, op) for lane, op in enumerate(ops) if lane > 0}
    threads[0].start()
    started = time.monotonic()
    for fault in faults:
        time.sleep(max(0.0, fault["at"] - (time.monotonic() - started)))
        if fault["kind"] == "kill":
            did = world.kill(fault["lane"])
            if did:
                killed.add(fault["lane"])
        elif fault["kind"] in FAULTS:
            did = FAULTS[fault["kind"]](world, fault)
        else:
            did = False
        if did:
            tally.faults[fault["kind"]] += 1
            echo(f"  step {index}: {fault['kind']} {json.dumps({k: v for k, v in fault.items() if k != 'kind'})}")
    deadline = started + OP_TIMEOUT
    for lane, proc in procs.items():
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except Exception:
            world.kill(lane)
            killed.add(lane)
            tally.violations.append(f"step {index}: lane {lane}'s {ops[lane]['kind']} did not end in {OP_TIMEOUT:.0f}s")
        if lane in killed:
            outcomes[lane] = "killed"
        else:
            outcomes[lane] = "ok" if proc.returncode == 0 else "failed"
            if proc.returncode:
                errors[lane] = world.last_error(lane)
    threads[0].join(timeout=max(1.0, deadline - time.monotonic()))
    if threads[0].is_alive():
        tally.violations.append(f"step {index}: the Spark lane's {ops[0]['kind']} did not end in {OP_TIMEOUT:.0f}s")
        outcomes[0] = "killed"
    uncertain = any(f["kind"] == "pg_restart" for f in faults)  # a lost connection may follow a commit
    # a connection lost on COMMIT (a link cut) says so; any other failure must have changed nothing
    unconfirmed = {lane for lane, e in errors.items() if "commit was not confirmed" in e}
    final = [("killed" if (o == "failed" and (uncertain or lane in unconfirmed)) else o) for lane, o in enumerate(outcomes)]
    _checked(tally, [f"{ops[lane]['kind']} failed as an internal error, not with a one-line reason: {errors[lane]}"
                     for lane in errors if lane > 0 and ops[lane]["kind"] != "write" and "internal error" in errors[lane]],
             f"step {index} errors")
    for lane, op in enumerate(ops):
        tally.ops[(op["kind"], final[lane])] += 1
        note = f" ({errors[lane]})" if lane in errors else ""
        echo(f"  step {index} lane {lane}: {op['kind']} {final[lane]}{note}")
    for table in ("a", "b"):
        if table in seen:
            _checked(tally, check_read(table, seen[table], allowed), f"step {index} read")
    if "join" in seen:
        _checked(tally, check_join(seen["join"], allowed), f"step {index} join")
    model.apply(list(zip(ops, final)))
    world.end_of_step()
    _checked(tally, check_lake(world, model), f"step {index} lake")
    _checked(tally, check_drift(world), f"step {index} catalog")


def settle(world: World, model: Model, tally: Tally, echo) -> None:
    """Faults stop: heal them, let repair bring every group to stable, then every invariant."""
    world.heal()

    def op(kind: str, **kw) -> int:
        proc = world.start(9, {"kind": kind, **kw})
        proc.wait(timeout=OP_TIMEOUT)
        if proc.returncode:
            echo(f"  settle: {kind} failed: {world.last_error(9)}")
        return proc.returncode

    op("probe")
    for b in world.catalog.backends.list():
        if b.state == "decommissioning":
            op("decommission", backend=b.name, cancel=True)
    for attempt in range(4):
        op("balance", verify=True)
        unstable = [g for g in world.catalog.health.check_groups() if not g.stable]
        if not unstable:
            break
    _checked(tally, [f"group {g.group} still unstable after repair: {g.reason}" for g in unstable], "settle")
    _checked(tally, check_lake(world, model, final=True), "settle lake")
    out = world.spark_op({"kind": "verify"})
    _checked(tally, [f"verify after repair: bad replica {b}" for b in out["verify_bad"]], "settle verify")
    allowed = {k: set(v) for k, v in model.live.items()}
    for table in ("a", "b"):
        _checked(tally, check_read(table, world.read_table(table), allowed), "settle read")
    _checked(tally, [f"after repair the model is still unsure of {k}: {sorted(v, key=str)}"
                     for k, v in allowed.items() if len(v) != 1], "settle model")
    op("gc", stale=True)
    _checked(tally, check_files(world), "settle gc")
    _checked(tally, check_drift(world), "settle catalog")


def run_schedule(schedule: dict, spark, root: Path, url: str, *, pg=None, link=None, echo=print) -> Tally:
    tally = Tally()
    tally.schedules = 1
    world = World(root, url, spark, pg=pg, link=link, echo=echo)
    model = Model()
    echo(f"nemesis seed {schedule['seed']}: {len(schedule['steps'])} steps on "
         f"{'PostgreSQL' if schedule.get('postgres') else 'SQLite'}")
    try:
        world.setup()
        for i, step in enumerate(schedule["steps"]):
            began = time.monotonic()
            run_step(world, model, step, i, tally, echo)
            echo(f"  step {i}: {time.monotonic() - began:.1f}s, {len(tally.violations)} violations so far")
        began = time.monotonic()
        settle(world, model, tally, echo)
        echo(f"  settled in {time.monotonic() - began:.1f}s")
    except Exception as exc:
        tally.violations.append(f"harness: {type(exc).__name__}: {exc}")
        raise
    finally:
        world.close()
    return tally


class Lakes:
    """Fresh roots and catalogs, one per schedule, on SQLite or one PostgreSQL server (reached by
    the worker processes over ``link``, a catalog_link.CatalogLink, when there is one)."""

    def __init__(self, base: Path, pg=None, link=None) -> None:
        self.base, self.pg, self.link, self.n = base, pg, link, 0

    def next(self) -> tuple[Path, str]:
        self.n += 1
        root = self.base / f"lake{self.n}"
        root.mkdir(parents=True)
        if self.pg is None:
            return root, f"sqlite:///{root / 'catalog' / 'catalog.db'}"  # the World mounts a tmpfs there
        from pgserver import fresh_pg_database

        return root, fresh_pg_database(self.pg.url)


def run_and_shrink(schedule: dict, spark, lakes: Lakes, *, echo=print, keep: Path | None = None) -> Tally:
    """Run ``schedule``; if it breaks an invariant, shrink it and keep the short one as JSON."""
    root, url = lakes.next()
    try:
        tally = run_schedule(schedule, spark, root, url, pg=lakes.pg, link=lakes.link, echo=echo)
    except Exception as exc:
        tally = Tally()
        tally.schedules = 1
        tally.violations.append(f"harness: {type(exc).__name__}: {exc}")
    if tally.violations and keep is not None:
        def fails(candidate: dict) -> bool:
            r, u = lakes.next()
            try:
                return bool(run_schedule(candidate, spark, r, u, pg=lakes.pg, link=lakes.link, echo=lambda _: None).violations)
            except Exception:
                return True

        small = shrink(schedule, fails, budget=SHRINK_TRIES)
        path = save(dict(small, violations=tally.violations[:5]),
                    keep / f"seed{schedule['seed']}-{'pg' if schedule.get('postgres') else 'sqlite'}.json")
        echo(f"shrunk to {len(small['steps'])} steps: {path}")
    return tally


def spark_session():
    from airflow_colocate.spark.session import get_spark

    # local[2,4]: a failed task is retried, so a registered read fails over through the jar
    session = get_spark("colocate-nemesis", master="local[2,4]", conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"})
    session.sparkContext.setLogLevel("ERROR")
    return session


def open_link():
    """The worker processes' link to PostgreSQL (tests/faults/catalog_link.py), or None with one
    line saying why."""
    from catalog_link import CatalogLink, unavailable

    reason = unavailable()
    if reason:
        print(reason, flush=True)
        return None
    return CatalogLink().__enter__()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, help="Replay this seed (with --steps); with --duration, the first seed.")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--duration", type=float, default=0, help="Run successive seeds for this many seconds.")
    ap.add_argument("--schedule", type=Path, help="Replay a JSON schedule.")
    ap.add_argument("--postgres", action="store_true", help="Catalog on PostgreSQL (with restarts as a fault).")
    ap.add_argument("--no-shrink", action="store_true")
    args = ap.parse_args(argv)
    if args.seed is None and args.schedule is None and not args.duration:
        ap.error("give --seed (with --steps), --schedule FILE or --duration SECONDS")
    base = Path(tempfile.mkdtemp(prefix="nemesis-"))
    pg = link = None
    if args.postgres:
        from pgserver import start_postgres

        link = open_link()
        pg = start_postgres(base / "pg", network=(link.hub_ip, link.worker_ip) if link else None,
                             durable=True)
    spark = spark_session()
    lakes, total = Lakes(base, pg, link), Tally()
    keep = None if args.no_shrink else HERE / "schedules"
    started = time.time()
    try:
        if args.schedule:
            total.add(run_and_shrink(load(args.schedule), spark, lakes, keep=None))
        else:
            seed = args.seed if args.seed is not None else int(started) % 100_000
            while True:
                print(f"== seed {seed} (replay: make nemesis SEED={seed} STEPS={args.steps}"
                      f"{' POSTGRES=1' if pg else ''})", flush=True)
                total.add(run_and_shrink(generate(seed, args.steps, postgres=pg is not None), spark, lakes, keep=keep))
                seed += 1
                if not args.duration or time.time() - started > args.duration:
                    break
    finally:
        spark.stop()
        if pg is not None:
            pg.stop()
        if link is not None:
            link.close()
    print(f"== nemesis: {time.time() - started:.0f}s")
    for line in total.lines():
        print(line)
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
