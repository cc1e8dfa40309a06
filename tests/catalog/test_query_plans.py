"""No control-plane operation scans the replicas table (PostgreSQL EXPLAIN).

On a catalog with enough history that the planner prefers an index whenever one fits (built by
the benchmark's bulk builder, then ANALYZEd), every statement that names ``replicas`` and that
the operations of issue 14 run — group check (with and without problems), balance dry-run with a
backend added and with one down, mark-down / mark-up, probe, backend loads, gc (steady and with
work), a daily commit, a 30-day join plan, and a balance job's clone / switch / finish / drop —
is captured as it runs and EXPLAINed with its own parameters: no plan may hold a ``Seq Scan on
replicas``."""

from __future__ import annotations

import re
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, select

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog import models as m
from airflow_colocate.core.contract import CloneResult, VerifyResult
from airflow_colocate.jobs.balance import BalanceOptions, plan
from airflow_colocate.jobs.read import read_plans

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_catalog  # noqa: E402

pytestmark = pytest.mark.postgres

SHAPE = bench_catalog.Shape(tables=4, days=400, buckets=16, replicas=3, backends=8)
NAMES_REPLICAS = re.compile(r"\breplicas\b")


@pytest.fixture(scope="module")
def lake_url(pg_server_url, tmp_path_factory):
    from pgserver import fresh_pg_database

    url = fresh_pg_database(pg_server_url)
    bench_catalog.build_bulk(url, SHAPE, tmp_path_factory.mktemp("lake"))
    return url


class Captured:
    def __init__(self, engine):
        self.engine = engine
        self.statements: list[tuple[str, object, str]] = []
        self.step: str | None = None  # None: the test's own look-ups, not an operation

    def __call__(self, conn, cursor, statement, parameters, context, executemany):
        if self.step is not None and NAMES_REPLICAS.search(statement):
            if isinstance(parameters, (list, tuple)) and parameters and isinstance(parameters[0], (dict, list, tuple)):
                parameters = parameters[0]  # executemany: the plan is the same for every row
            self.statements.append((statement, parameters, self.step))


def explain_all(cat: Catalog, captured: Captured) -> dict[str, list[str]]:
    """step -> plans that scan replicas sequentially (with their statements)."""
    bad: dict[str, list[str]] = {}
    raw = cat.engine.raw_connection()
    try:
        cur = raw.cursor()
        seen = set()
        for statement, parameters, step in captured.statements:
            if (statement, step) in seen:
                continue  # the same statement with other values: one plan per step is enough
            seen.add((statement, step))
            cur.execute("EXPLAIN " + statement, parameters or None)
            text = "\n".join(row[0] for row in cur.fetchall())
            if "Seq Scan on replicas" in text:
                bad.setdefault(step, []).append(f"{statement}\n{text}")
        raw.rollback()
    finally:
        raw.close()
    return bad


def test_no_operation_scans_the_replicas_table(lake_url, tmp_path):
    cat = Catalog(lake_url, actor="pytest")
    captured = Captured(cat.engine)
    event.listen(cat.engine, "before_cursor_execute", captured)
    days = [bench_catalog.day_value(d) for d in range(SHAPE.days - 30, SHAPE.days)]

    def step(name):
        captured.step = name

    step("group check")
    cat.health.check_groups()
    step("unchanged check")
    assert all(h.reused for h in cat.health.check_groups())
    step("backend loads")
    cat.backends.loads()
    step("balance dry-run, backend added")
    (tmp_path / "new").mkdir()
    added = cat.backends.add((tmp_path / "new").as_uri(), name="be_new")
    plan(cat, BalanceOptions())
    cat.backends.remove(added.id)
    step("mark-down")
    cat.backends.set_state("be1", "down", reason="test")
    cat.health.check_groups()
    step("balance dry-run, backend down")
    plan(cat, BalanceOptions(relocate_delay=timedelta(0)))
    step("mark-up")
    cat.backends.set_state("be1", "alive")
    cat.health.check_groups()
    step("probe")
    for b in cat.backends.list():
        cat.health.record_probe(b.id, True)
    cat.health.check_groups()
    step("gc, steady state")
    cat.writes.forget_garbage(cat.writes.garbage())
    step("daily commit")
    bench_catalog.daily_write(cat, 0, SHAPE.days, (tmp_path / "runs").as_uri())
    step("join plan, 30 days")
    read_plans(cat, {"default.t0": days, "default.t1": days})
    step("retention pass, steady state")
    cat.partitions.expire(today=bench_catalog.FIRST_DAY + timedelta(days=SHAPE.days))
    step("the recycle bin of every table")
    cat.partitions.recycle_bin()
    step("partition drop and recover")
    cat.partitions.drop("t2", days[0])
    cat.partitions.recover("t2", days[0])
    step("a bad replica, and the check that reports it")
    victim = cat.reads.replicas("t1", [days[3]])[1][0].buckets[5][0]
    step(None)
    rid = cat.tx(lambda s: s.scalar(select(m.Replica.id).where(m.Replica.path == victim.path)))
    step("a bad replica, and the check that reports it")
    cat.health.record_verify([VerifyResult(rid, ok=False, error="mismatch")])
    health = cat.health.check_group("lake")
    assert health.problems == 1 and health.reasons[0].partition == days[3]
    step("overwrite, then gc with work")
    bench_catalog.daily_write(cat, 1, SHAPE.days - 3, (tmp_path / "runs").as_uri())
    garbage = cat.writes.garbage(grace=timedelta(0))
    assert {g.reason for g in garbage} >= {"superseded version"}
    cat.writes.forget_garbage(garbage)
    step("balance job: plan, clone, switch, finish, drop")
    g = cat.groups.get("lake")
    old = [list(r) for r in g.bucket_map]
    dst = next(b.id for b in cat.backends.list() if b.id not in old[0])
    new = [[dst, *row[1:]] if seq == 0 else row for seq, row in enumerate(old)]
    job = cat.balance.create(g.grp_id, "balance", {"old_map": old, "new_map": new, "moves": [
        {"bucket_seq": 0, "index": 0, "src": old[0][0], "dst": dst, "bytes": 0, "why": "balance"}]}).id
    cat.balance.begin(job)
    registered = []
    for _ in range(2):
        needs, _ = cat.balance.clone_needs(job)
        step("register clones")
        registered.append(cat.balance.register_clones(job, [
            CloneResult(str(i), n.partition_id, n.version, n.bucket_seq, n.backend_id, n.sources[0][0], n.path, True,
                        n.rows, n.bytes, n.checksum) for i, n in enumerate(needs)])[0])
        step("balance job: plan, clone, switch, finish, drop")
        cat.balance.move_progress(job)
        cat.balance.switch_map(job)
    # every visible partition's bucket 0 (the recycle bin's are not moved: they are not read)
    assert registered[0] >= SHAPE.tables * (SHAPE.days - bench_catalog.dropped_days(SHAPE)) + 1
    plan(cat, BalanceOptions())
    done = cat.balance.finish(job, grace=timedelta(0))
    # bucket 0 of every visible day, and the daily commit
    assert done.done and cat.balance.close(job, grace=timedelta(0)) == SHAPE.tables * (SHAPE.days - bench_catalog.dropped_days(SHAPE)) + 1
    step("take droppable")
    cat.balance.forget_replicas([i.replica_id for i in cat.balance.take_droppable()])
    # registering 1,601 clones and dropping 1,601 replicas read the rows they need in a few
    # chunked statements, not a few per replica (a lost disk of a 3-year lake is ~90,000 clones)
    per_step = Counter(st for _, _, st in captured.statements)
    assert per_step["register clones"] < 100 and per_step["take droppable"] < 100, per_step
    event.remove(cat.engine, "before_cursor_execute", captured)
    assert {s for _, _, s in captured.statements} >= {"daily commit", "join plan, 30 days", "overwrite, then gc with work",
                                                       "a bad replica, and the check that reports it",
                                                       "balance job: plan, clone, switch, finish, drop"}
    bad = explain_all(cat, captured)
    assert not bad, "\n\n".join(f"[{step}]\n" + "\n---\n".join(plans) for step, plans in bad.items())
    cat.dispose()
