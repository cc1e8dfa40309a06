"""The nemesis in CI: a few short seeded schedules of concurrent work and faults on SQLite and on
PostgreSQL, every invariant checked after every step and once the faults stop; and every shrunk
schedule the long runs kept (tests/nemesis/schedules/*.json) replayed as a regression test.

``make nemesis`` runs the long ones (docs/operations.md, "Nemesis")."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "faults")]

from catalog_link import CatalogLink, unavailable  # noqa: E402
from nemesis_run import Lakes, Tally, run_schedule  # noqa: E402
from nemesis_schedule import generate, load  # noqa: E402

pytestmark = [pytest.mark.spark]


@pytest.fixture(autouse=True)
def _root():
    """The lake mounts tmpfs file systems (ENOSPC, a backend down): CI runs as root."""
    if os.geteuid() != 0:
        pytest.skip("the nemesis mounts tmpfs file systems: run as root (CI does)")

SQLITE_SEEDS = (147, 311)  # with the kept schedules: every fault kind of SQLite (190: tests/nemesis/known, the read race)
PG_SEEDS = (328,)  # a restart, a kill, a corrupt file, ENOSPC, the link to the catalog cut
STEPS = 4
KEPT = sorted((HERE / "schedules").glob("*.json"))


@pytest.fixture(scope="module")
def catalog_link():
    """The worker processes' link to PostgreSQL, one for the module (a namespace and a veth, no
    server): None, with one line, where it cannot be made (the 'link' faults are then skipped)."""
    reason = unavailable()
    if reason:
        print(reason)
        yield None
        return
    with CatalogLink() as link:
        yield link


def _pg_lakes(tmp_path: Path, link):
    from pgserver import start_postgres

    server = start_postgres(tmp_path / "pg", network=(link.hub_ip, link.worker_ip) if link else None,
                            durable=True)
    return server, Lakes(tmp_path / "lakes", server, link)


def _run(schedule: dict, spark, lakes: Lakes) -> Tally:
    root, url = lakes.next()
    tally = run_schedule(schedule, spark, root, url, pg=lakes.pg, link=lakes.link)
    for line in tally.lines():
        print(line)
    return tally


@pytest.mark.parametrize("seed", SQLITE_SEEDS)
def test_nemesis_sqlite(seed, spark, tmp_path):
    tally = _run(generate(seed, STEPS), spark, Lakes(tmp_path))
    assert tally.violations == [], f"replay: make nemesis SEED={seed} STEPS={STEPS}"
    assert sum(tally.faults.values()) > 0 and tally.checks >= 2 * STEPS


@pytest.mark.postgres
@pytest.mark.parametrize("seed", PG_SEEDS)
def test_nemesis_postgres(seed, spark, tmp_path, catalog_link):
    from pgserver import find_pg_bin

    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries not found: 'apt-get install postgresql'")
    server, lakes = _pg_lakes(tmp_path, catalog_link)  # its own server: the schedule restarts it
    try:
        tally = _run(generate(seed, STEPS, postgres=True), spark, lakes)
    finally:
        server.stop()
    assert tally.violations == [], f"replay: make nemesis SEED={seed} STEPS={STEPS} POSTGRES=1"


@pytest.mark.parametrize("path", KEPT, ids=[p.stem for p in KEPT])
def test_kept_schedule(path, spark, tmp_path, request, catalog_link):
    schedule = load(path)
    if schedule.get("postgres"):
        request.applymarker(pytest.mark.postgres)
        server, lakes = _pg_lakes(tmp_path, catalog_link)
        try:
            tally = _run(schedule, spark, lakes)
        finally:
            server.stop()
    else:
        tally = _run(schedule, spark, Lakes(tmp_path))
    assert tally.violations == [], f"{path.name} broke again"
