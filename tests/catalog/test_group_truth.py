"""Issue 30: what an unstable group and a table say. ``unstable_since`` follows ``stable`` wherever
it is assigned; a group's outlook (relocation time, joins shuffle) follows the balance's and the
planner's rules; a partition whose last readable copy is on a backend that is not alive is
listed as unavailable, from SQL, and counted in the metrics."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import BadReplica, ReplicaReport, WriteReport
from colocate_testing import add_local_backends

T0 = datetime(2026, 11, 25, 8, 0, tzinfo=timezone.utc)
DELAY = timedelta(minutes=30)


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def commit(cat: Catalog, table: str, partition: str) -> None:
    """A partition version as the write job would report it (the catalog needs no files)."""
    ticket = cat.writes.begin(table, partition)
    targets = {seq: [be for be, _ in bucket] for seq, bucket in enumerate(ticket.targets)}
    cat.writes.set_targets(ticket.job_id, targets, ticket.missing, {})
    replicas = [ReplicaReport(seq, be, f"{root}/{table}/{partition}/v{ticket.version}/b{seq}", ["part-0.parquet"],
                              10, 1000, f"{seq:064x}")
                for seq, bucket in enumerate(ticket.targets) for be, root in bucket]
    cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), ticket.table.qualified_name, partition,
                                                ticket.version, 10 * len(ticket.targets), replicas, 0.1, "test"))


@pytest.fixture
def lake(tmp_path):
    """Three backends; group g (replication 2, two tables), a replication-1 table outside any
    group (``loose``, 3 buckets: one per backend), a few committed partitions each."""
    clock = Clock()
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
    cat.init()
    cat.clock = clock
    add_local_backends(cat, tmp_path / "backends", n=3)
    cat.tables.create("orders", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=6, replication_num=2,
                      partition_cols=["dt"], colocate_with="g")
    cat.tables.create("items", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=6, replication_num=2,
                      partition_cols=["dt"], colocate_with="g")
    cat.tables.create("loose", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=3, replication_num=1,
                      partition_cols=["dt"])
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        for t in ("orders", "items", "loose"):
            commit(cat, t, day)
    assert all(h.stable for h in cat.health.check_groups())
    yield cat
    cat.dispose()


def test_unstable_since_follows_every_way_the_flag_changes(lake):
    g = lake.groups.get("g")
    assert lake.groups.outlook("g").unstable_since is None
    lake.clock.now = T0 + timedelta(minutes=5)
    lake.groups.set_stable("g", False, reason="operator")  # a mark
    assert lake.groups.outlook("g").unstable_since == T0 + timedelta(minutes=5)
    lake.clock.now = T0 + timedelta(minutes=9)
    lake.groups.set_stable("g", False, reason="again")  # unstable -> unstable keeps the first time
    assert lake.groups.outlook("g").unstable_since == T0 + timedelta(minutes=5)
    lake.groups.set_stable("g", True)
    assert lake.groups.outlook("g").unstable_since is None

    lake.clock.now = T0 + timedelta(minutes=20)  # a check that finds a down backend
    lake.backends.set_state("be2", "down", reason="disk pulled")
    lake.clock.now = T0 + timedelta(minutes=21)
    assert not lake.health.check_group("g").stable
    assert lake.groups.outlook("g").unstable_since == T0 + timedelta(minutes=21)
    lake.backends.set_state("be2", "alive", reason="back")
    assert lake.health.check_group("g").stable
    assert lake.groups.outlook("g").unstable_since is None

    lake.clock.now = T0 + timedelta(minutes=40)  # a replica a read found bad (no group event)
    _, parts = lake.reads.replicas("orders", ["2026-11-01"])
    r = parts[0].buckets[0][0]
    lake.health.mark_replicas_bad([BadReplica(r.id, "default.orders", "2026-11-01", 0, r.backend_id, r.path, "test")])
    assert lake.groups.outlook("g").unstable_since == T0 + timedelta(minutes=40)
    mx = next(x for x in lake.metrics.read().groups if x.group == f"{g.db_id}_g")
    assert mx.unstable_since == T0 + timedelta(minutes=40)  # the metrics read the column


def test_outlook_relocation_time_and_joins_shuffle(lake):
    lake.clock.now = T0 + timedelta(minutes=1)
    lake.backends.set_state("be2", "down", reason="disk pulled")
    # not checked yet: still flagged stable, but the map names a down backend, so joins shuffle
    out = lake.groups.outlook("g", relocate_delay=DELAY)
    assert out.joins_shuffle and "names backend(s) be2, which are not alive" in out.joins_shuffle_reason
    assert out.relocation_starts_at == T0 + timedelta(minutes=31) and not out.relocation_due
    assert out.relocation_backends == ("be2",)

    lake.clock.now = T0 + timedelta(minutes=10)
    lake.health.check_group("g")
    out = lake.groups.outlook("g", relocate_delay=DELAY)
    assert out.unstable_since == T0 + timedelta(minutes=10)
    assert out.joins_shuffle and out.joins_shuffle_reason.startswith("group is not stable: backend be2 is down")
    assert out.relocation_starts_at == T0 + timedelta(minutes=31)
    assert lake.groups.outlook("g", relocate_delay=timedelta(minutes=5)).relocation_starts_at is None
    assert lake.groups.outlook("g", relocate_delay=timedelta(minutes=5)).relocation_due

    lake.clock.now = T0 + timedelta(minutes=31)  # the delay has passed: relocation is due, no time
    out = lake.groups.outlook("g", relocate_delay=DELAY)
    assert out.relocation_due and out.relocation_starts_at is None
    d = out.to_dict()
    assert {"unstable_since", "relocation_starts_at", "relocation_due", "joins_shuffle"} <= set(d)

    lake.backends.set_state("be2", "alive", reason="back")
    lake.health.check_group("g")
    out = lake.groups.outlook("g", relocate_delay=DELAY)
    assert (out.unstable_since, out.relocation_starts_at, out.relocation_due, out.joins_shuffle) == (None, None, False, False)
    lake.set_flag("disable_colocate_join", True)
    out = lake.groups.outlook("g")
    assert out.joins_shuffle and out.joins_shuffle_reason == "colocate join is disabled"
    assert set(lake.groups.outlooks()) == {lake.groups.get("g").grp_id}


def test_unavailable_partitions_of_a_replication_1_table(lake):
    assert lake.tables.unavailable("loose").count == 0 and lake.tables.availability().total == 0
    loose = lake.tables.get("loose")
    _, parts = lake.reads.replicas("loose", None)
    holder = parts[0].buckets[1][0].backend_id  # bucket 1's only copy
    name = next(b.name for b in lake.backends.list() if b.id == holder)
    lake.backends.set_state(name, "down", reason="disk pulled")
    got = lake.tables.unavailable("loose")
    assert got.count == 3 and got.partitions == ("2026-11-01", "2026-11-02", "2026-11-03"), got
    assert got.backends == (name,)
    assert lake.tables.unavailable("loose", limit=2).partitions == ("2026-11-01", "2026-11-02")
    # the group keeps a second replica of every bucket: nothing of it is unavailable
    assert lake.tables.unavailable("orders").count == 0
    every = lake.tables.availability()
    assert set(every.tables) == {loose.id} and every.by_backend == {holder: 3}
    mx = lake.metrics.read()
    assert {t.table: t.unavailable_partitions for t in mx.tables} == {
        "default.orders": 0, "default.items": 0, "default.loose": 3}
    assert next(b for b in mx.backends if b.name == name).unavailable_partitions == 3
    from airflow_colocate.plugins.prometheus import render

    lines = render(mx).splitlines()
    assert "colocate_partitions_unavailable 3" in lines
    assert 'colocate_table_partitions_unavailable{table="default.loose"} 3' in lines
    assert f'colocate_backend_partitions_unavailable{{backend="{name}"}} 3' in lines

    lake.partitions.drop("loose", "2026-11-02")
    assert lake.tables.unavailable("loose").partitions == ("2026-11-01", "2026-11-03")  # a dropped one is not read
    lake.backends.set_state(name, "alive", reason="back")
    assert lake.tables.unavailable("loose").count == 0 and lake.metrics.read().tables[-1].unavailable_partitions == 0


def test_a_group_partition_is_unavailable_only_where_its_alive_copy_is_gone(lake):
    """Group g's map puts buckets 0 and 3 on be1 and be2. With be1 down every partition still
    has bucket 0 on be2, until one partition's copy there is found bad: that partition alone is
    unavailable (the summaries cannot tell which one; the SQL does). With be2 down too, all are."""
    assert [sorted(r) for r in lake.groups.get("g").bucket_map][0] == [1, 2]
    lake.backends.set_state("be1", "down", reason="x")
    assert lake.tables.unavailable("orders").count == 0
    _, parts = lake.reads.replicas("orders", ["2026-11-02"])
    r = next(r for r in parts[0].buckets[0] if r.backend_id == 2)
    lake.health.mark_replicas_bad([BadReplica(r.id, "default.orders", "2026-11-02", 0, 2, r.path, "test")])
    got = lake.tables.unavailable("orders")
    assert (got.count, got.partitions, got.backends) == (1, ("2026-11-02",), ("be1",))
    assert lake.tables.unavailable("items").count == 0
    lake.backends.set_state("be2", "down", reason="y")
    got = lake.tables.unavailable("orders")
    assert got.count == 3 and got.backends == ("be1", "be2")
    assert lake.tables.availability().total == 3 + 3 + 3  # orders, items, and loose's bucket on be1 or be2


def test_unavailable_agrees_with_the_replicas_for_every_down_set(lake):
    """An oracle from the replicas themselves (a partition is lost when some bucket's verified
    replicas are all on down backends), against every one and two backends down, with a partition
    of fewer buckets and a bad replica in the mix: the summaries' shortcuts and the SQL agree."""
    from itertools import combinations

    lake.partitions.add("loose", "2026-11-04", bucket_num=1)
    commit(lake, "loose", "2026-11-04")
    _, parts = lake.reads.replicas("orders", ["2026-11-03"])
    r = parts[0].buckets[4][0]
    lake.health.mark_replicas_bad([BadReplica(r.id, "default.orders", "2026-11-03", 4, r.backend_id, r.path, "t")])
    names = {b.id: b.name for b in lake.backends.list()}
    replicas = {t: lake.reads.replicas(t, None)[1] for t in ("orders", "items", "loose")}
    for down in [*combinations(sorted(names), 1), *combinations(sorted(names), 2)]:
        for be in names:
            lake.backends.set_state(names[be], "down" if be in down else "alive", reason="test")
        for t, parts in replicas.items():
            lost = sorted(p.value for p in parts if any(
                bucket and all(r.backend_id in down for r in bucket) for bucket in p.buckets))
            got = lake.tables.unavailable(t)
            assert (got.count, list(got.partitions)) == (len(lost), lost), (t, down, got)
