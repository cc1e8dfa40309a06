"""A balance job killed after each step in turn is finished by the next run, with nothing lost."""

from __future__ import annotations

import pytest
from balance_lake import Killed, assert_whole, dies_after_copying, fingerprint, kill_at, replica_dirs, rows

from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs

STEPS = ["planned", "unstable", "cloned", "switched", "finished", "dropping", "dropped"]


def every_bucket_has_a_good_replica(catalog):
    for t in catalog.tables.list():
        _, parts = catalog.reads.replicas(t.qualified_name)
        for p in parts:
            for seq, bucket in enumerate(p.buckets):
                good = [r for r in bucket if replica_dir.replica_checksum(
                    [(n, copy_mod.sha256_file(fs.join(r.path, n))) for n, _ in replica_dir.replica_files(r.path)]) == r.checksum]
                assert good, f"{t.name}/{p.value} bucket {seq} has no verified replica with intact files"


@pytest.fixture
def loaded(lake):
    for i, table in enumerate(("orders", "lineitem")):
        lake.create(table, buckets=6)
        for d, day in enumerate(("2026-11-01", "2026-11-02")):
            lake.write(table, day, range(d * 5000 + i, d * 5000 + i + 300))
    before = ({t: rows(lake.catalog, t) for t in ("orders", "lineitem")}, fingerprint(lake.catalog))
    lake.add_backend("be4")  # empty: the balance gives it its share
    return lake, before


@pytest.mark.parametrize("step", STEPS + ["mid-clone"])
def test_killed_after_each_step_then_resumed(loaded, step):
    lake, (before_rows, before_sums) = loaded
    cat = lake.catalog
    if step == "mid-clone":
        with pytest.raises(Killed):
            dies_after_copying(lake.balancer()).run()
    else:
        with pytest.raises(Killed):
            lake.run(on_step=kill_at(step))
    every_bucket_has_a_good_replica(cat)
    jobs = cat.jobs.list(kinds=["balance"])
    assert len(jobs) == 1
    if step not in ("finished", "dropping", "dropped"):
        assert jobs[0].state == "running"
        assert not cat.health.check_group("g").stable  # a job is changing it
    if step == "finished":  # its changes are done: stable now; the marks of what it left wait for the next run
        assert (jobs[0].state, jobs[0].step) == ("running", "finished")
        assert cat.health.check_group("g").stable
        assert cat.balance.snapshot().groups[0].redundant > 0

    summary = lake.run()
    assert [j for j in cat.jobs.list(kinds=["balance"]) if j.state == "running"] == []
    assert len(cat.jobs.list(kinds=["balance"])) == 1  # resumed, never planned twice
    assert summary["groups"][0]["stable"]
    assert_whole(cat)
    g = cat.groups.get("g")
    load = {be: sum(row.count(be) for row in g.bucket_map) for be in lake.names.values()}
    assert sorted(load.values()) == [3, 3, 3, 3]  # 6 buckets x 2 replicas over 4 backends
    assert fingerprint(cat) == before_sums
    assert {t: rows(cat, t) for t in before_rows} == before_rows
    # nothing left behind: exactly the catalog's replicas are on disk
    on_disk = replica_dirs(lake.root)
    in_catalog = {fs.local_path(r.path) for t in cat.tables.list() for p in cat.reads.replicas(t.qualified_name)[1]
                  for b in p.buckets for r in b if r.rows}
    assert on_disk == in_catalog
