"""The partition recycle bin in the catalog: a dropped partition leaves reads, the summaries and
stability; recover brings back the same version; purge hands its files to gc after the grace;
retention drops exactly the partitions dated before today - N (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from colocate_testing import add_local_backends
from test_incremental import COLUMNS, Clock, write

from airflow_colocate.catalog import Catalog, summary
from airflow_colocate.core.errors import ColocateError

DAYS = [f"2026-11-{d:02d}" for d in range(1, 11)]


@pytest.fixture
def cat(catalog_url, tmp_path):
    clock = Clock()
    c = Catalog(catalog_url, actor="pytest", clock=clock)
    c.clock = clock
    c.init()
    add_local_backends(c, tmp_path / "backends", n=2)
    c.tables.create("a", COLUMNS, ["id"], bucket_num=2, replication_num=1, partition_cols=["dt"], colocate_with="g")
    c.tables.create("b", COLUMNS, ["id"], bucket_num=2, replication_num=1, partition_cols=["dt"], colocate_with="g")
    for day in DAYS[:4]:
        write(c, "a", day)
        write(c, "b", day)
    yield c
    c.dispose()


def test_drop_recover_and_purge(cat):
    before = cat.reads.replicas("a")[1]
    sizes = cat.tx(summary.stored)
    cat.partitions.drop("a", DAYS[1])
    assert [p.value for p in cat.reads.replicas("a")[1]] == [DAYS[0], DAYS[2], DAYS[3]]
    assert [(p.value, p.dropped_version) for p in cat.partitions.list("a", dropped=True)] == [(DAYS[1], 1)]
    assert DAYS[1] not in [p.value for p in cat.partitions.list("a")]
    assert cat.tx(summary.drift) == [] and cat.tx(summary.stored) != sizes
    assert cat.health.check_group("g").stable
    with pytest.raises(ColocateError, match="no committed data"):
        cat.reads.replicas("a", [DAYS[1]])
    with pytest.raises(ColocateError, match="recycle bin.*partition recover"):
        cat.writes.begin("a", DAYS[1])
    with pytest.raises(ColocateError, match="already in the recycle bin"):
        cat.partitions.drop("a", DAYS[1])
    cat.partitions.recover("a", DAYS[1])
    assert cat.reads.replicas("a")[1] == before
    assert cat.tx(summary.stored) == sizes and cat.tx(summary.drift) == []
    with pytest.raises(ColocateError, match="not in the recycle bin"):
        cat.partitions.recover("a", DAYS[1])
    assert [e.kind for e in cat.events(limit=2)] == ["partition.recover", "partition.drop"]

    # purge after the window: gc gets the dropped version's directories only after the grace
    cat.partitions.drop("a", DAYS[2])
    assert cat.partitions.purge_dropped(retention=timedelta(days=1)) == []
    cat.clock.t += timedelta(days=1)
    assert [p.value for _, p in cat.partitions.purge_dropped(retention=timedelta(days=1))] == [DAYS[2]]
    assert cat.partitions.list("a", dropped=True) == []
    assert not [g for g in cat.writes.garbage(grace=timedelta(hours=1)) if "superseded" in g.reason]
    cat.clock.t += timedelta(hours=1)
    garbage = [g for g in cat.writes.garbage(grace=timedelta(hours=1)) if "superseded" in g.reason]
    assert garbage and all(f"/dt={DAYS[2]}/" in g.uri or DAYS[2] in g.uri for g in garbage)
    cat.writes.forget_garbage(garbage)
    write(cat, "a", DAYS[2], salt="anew")  # a purged partition can be written again
    assert cat.reads.replicas("a", [DAYS[2]])[1][0].version == 2
    assert cat.tx(summary.drift) == []


def test_force_drop_and_a_write_racing_a_drop(cat):
    cat.partitions.drop("a", DAYS[0], force=True)
    assert cat.partitions.list("a", dropped=True) == []
    with pytest.raises(ColocateError, match="not in the recycle bin"):
        cat.partitions.recover("a", DAYS[0])
    ticket = cat.writes.begin("b", DAYS[3])
    cat.partitions.drop("b", DAYS[3])
    from airflow_colocate.core.contract import WriteReport
    with pytest.raises(ColocateError, match="dropped while this write ran"):
        cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), "default.b", DAYS[3], ticket.version, 0, [], 0.0, "t"))
    with pytest.raises(ColocateError, match="no committed data to drop"):
        cat.partitions.drop("b", "2030-01-01")


def test_retention_drops_exactly_the_older_partitions(cat):
    cat.partitions.set_retention("a", 3)
    for day in DAYS[4:]:
        write(cat, "a", day)
    done = cat.partitions.expire(today=date(2026, 11, 10))
    # kept: 2026-11-07 .. 2026-11-10 (not older than 3 days); table b has no retention
    assert [e.partition for e in done] == DAYS[:6]
    assert [p.value for p in cat.partitions.list("a")] == DAYS[6:]
    assert len(cat.partitions.list("b")) == 4
    assert cat.partitions.expire(today=date(2026, 11, 10)) == []
    assert cat.tx(summary.drift) == []
