"""Two (or eight) Airflow tasks writing the catalog at once never lose an update.

Each worker is a separate process with its own engine, as separate Airflow tasks would be; a
barrier releases them together so that their transactions overlap.
"""

from __future__ import annotations

import multiprocessing as mp

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.errors import AlreadyExists

WORKERS = 6
TABLES_PER_WORKER = 5


def _create_tables(url: str, worker: int, barrier, results) -> None:
    cat = Catalog(url, actor=f"task{worker}")
    barrier.wait()
    for i in range(TABLES_PER_WORKER):
        cat.tables.create(f"t_{worker}_{i}", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=4,
                         replication_num=2, partition_cols=["dt"], colocate_with="g_race")
        cat.partitions.add(f"t_{worker}_{i}", "2026-11-01")
        cat.groups.set_stable("g_race", True)
    # everyone tries to take the same name: exactly one may win
    try:
        cat.tables.create("contended", [("k", "bigint")], ["k"], bucket_num=4, replication_num=2, colocate_with="g_race")
        results.put(("won", worker))
    except AlreadyExists:
        results.put(("lost", worker))
    cat.dispose()


def test_racing_writers_lose_nothing(catalog, backends):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_create_tables, args=(catalog.url, w, barrier, results)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    outcomes = sorted(results.get(timeout=10) for _ in range(WORKERS))
    assert [o for o, _ in outcomes].count("won") == 1

    groups = catalog.groups.list()
    assert len(groups) == 1, "every worker must have joined the one group the first created"
    g = groups[0]
    expected_tables = WORKERS * TABLES_PER_WORKER + 1
    assert len(g.table_ids) == expected_tables
    # version: 1 at creation, +1 per table joining, +1 per manual mark: a lost read-modify-write shows here
    assert g.version == 1 + expected_tables + WORKERS * TABLES_PER_WORKER
    assert len(catalog.tables.list()) == expected_tables
    assert sum(len(catalog.partitions.list(t.name, empty=True)) for t in catalog.tables.list()) == WORKERS * TABLES_PER_WORKER
    events = catalog.events(limit=10_000)
    assert sum(e.kind == "table.create" for e in events) == expected_tables
    assert sum(e.kind == "group.create" for e in events) == 1
