"""The catalog methods behind the admin API, on SQLite and PostgreSQL: forcing a bucket map
(validated, refused, logged, one transaction), backend loads and the job listing."""

from __future__ import annotations

import pytest

from airflow_colocate.core.errors import Conflict, InvalidArgument, NotFound
from plugin_testing import commit_fake_write


@pytest.fixture
def grouped(catalog, backends):
    catalog.tables.create("orders", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=3, replication_num=2,
                         partition_cols=["dt"], colocate_with="g")
    return catalog


def state(cat):
    g = cat.groups.get("g")
    return g.bucket_map, g.stable, g.version, [e.id for e in cat.events(limit=1000)]


def test_set_bucket_map_refused_until_both_flags_are_set(grouped):
    cat = grouped
    new = [[2, 3], [3, 1], [1, 2]]
    before = state(cat)
    with pytest.raises(Conflict, match="disable_colocate_balance and disable_colocate_relocate are not set.*or pass force"):
        cat.groups.set_bucket_map("g", new)
    assert state(cat) == before
    cat.set_flag("disable_colocate_balance", True)
    cat.set_flag("disable_colocate_relocate", True)
    g = cat.groups.set_bucket_map("g", new)
    assert [list(r) for r in g.bucket_map] == new and g.stable  # no committed data: nothing to move
    [e] = cat.events(limit=1)
    assert (e.kind, e.actor, e.detail["new_map"], e.detail["changed"]) == ("group.set_bucket_map", "pytest", new, True)
    assert cat.groups.get("g").version == before[2] + 1


def test_set_bucket_map_force_and_data_that_must_move(grouped):
    cat = grouped
    commit_fake_write(cat, "orders", "2026-11-01")
    old = [list(r) for r in cat.groups.get("g").bucket_map]
    same = cat.groups.set_bucket_map("g", old, force=True)
    assert same.stable and cat.events(limit=1)[0].detail["changed"] is False
    moved = [[row[1], row[0]] for row in old]  # same backends, primaries swapped: every replica is in place
    assert cat.groups.set_bucket_map("g", moved, force=True).stable
    elsewhere = [[1, 2], [1, 2], [1, 2]]
    g = cat.groups.set_bucket_map("g", elsewhere, force=True)
    assert not g.stable and "replicas are not on the backends the map names" in g.unstable_reason
    assert cat.events(limit=1)[0].detail["unplaced"] > 0


@pytest.mark.parametrize("bucket_map, message", [
    ([[1, 2], [2, 3]], "it has 2 entries, the group has 3 buckets"),
    ([[1], [2], [3]], "bucket 0 lists 1 backends"),
    ([[1, 9], [2, 3], [3, 1]], "bucket 0 names backend 9, which does not exist (backends: 1 (be1), 2 (be2), 3 (be3))"),
    ([[1, 1], [2, 3], [3, 1]], "bucket 0 lists backend 1 twice"),
    ([[1, "2"], [2, 3], [3, 1]], "bucket 0 has '2', expected backend ids"),
    ([[1, True], [2, 3], [3, 1]], "bucket 0 has True"),
    ({"0": [1, 2]}, "expected a list with one list of backend ids per bucket"),
])
def test_set_bucket_map_validation(grouped, bucket_map, message):
    before = state(grouped)
    with pytest.raises(InvalidArgument) as err:
        grouped.groups.set_bucket_map("g", bucket_map, force=True)
    assert message in str(err.value)
    assert state(grouped) == before


def test_set_bucket_map_refuses_down_backends_and_shared_hosts(grouped, tmp_path):
    cat = grouped
    cat.backends.set_state("be3", "down")
    (tmp_path / "be4").mkdir()
    cat.backends.add((tmp_path / "be4").as_uri(), name="be4", host="be1")
    with pytest.raises(InvalidArgument, match=r"backend 3 \(be3\), which is down.*bucket 2 puts two replicas on host be1"):
        cat.groups.set_bucket_map("g", [[1, 2], [3, 2], [1, 4]], force=True)
    with pytest.raises(NotFound):
        cat.groups.set_bucket_map("nope", [[1, 2]] * 3, force=True)


def test_backend_loads_and_list_jobs(grouped):
    cat = grouped
    commit_fake_write(cat, "orders", "2026-11-01", bytes_per_replica=100)
    loads = cat.backends.loads()
    assert sum(v["slots"] for v in loads.values()) == 3 * 2
    assert sum(v["replicas"] for v in loads.values()) == 6 and sum(v["bytes"] for v in loads.values()) == 600
    [job] = cat.jobs.list()
    assert (job.kind, job.state, job.group_id, job.group) == ("write", "committed", "1.1", "1_g")
    assert cat.jobs.list(kinds=["balance"]) == [] and cat.jobs.list(states=["committed"]) == [job]
