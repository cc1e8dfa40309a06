"""The local backends' crash scenarios on backends in a real HDFS (the MiniDFSCluster), where a copy
is staged in the backend's tmp area and renamed, as on a disk: a balance killed after each of its
steps, finished by the next run with every row and nothing left behind once gc ran; a write killed
after placing some of its files (the next one staged, not yet renamed), whose files gc removes while
the committed version keeps its rows. One lake for all of it: the cluster is shared, and each step
is a new backend to balance onto."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from balance_lake import Killed, assert_whole, fingerprint, kill_at, rows
from test_hdfs_control_plane import files_under
from test_s3_killed import STEPS

from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import fs, replica_dir

DAY = "2026-11-01"


def everything_under(root: str) -> set[str]:
    """Every file under a backend's root (the tmp area's too), listed without the code under test."""
    from pyarrow.fs import FileSelector, FileType

    filesystem, path = fs._arrow(root)
    return {i.path for i in filesystem.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
            if i.type == FileType.File}


def temporaries(lake) -> set[str]:
    """Every temporary copy under every backend's root (in a tmp area, or beside its final name)."""
    return {p for b in lake.catalog.backends.list() for p in everything_under(b.root_uri)
            if replica_dir.is_tmp_name(p.rsplit("/", 1)[-1])}


def collect(lake, stale=timedelta(hours=24)) -> None:
    """gc twice over the stale period: the first marks a killed write's version stale, the second
    removes what no version names. A temporary copy is aged by the time in its name (the
    machine's clock, not the catalog's): a killed write's is collected with a stale period of 1 s."""
    for _ in range(2):
        lake.clock.advance(hours=25)
        time.sleep(stale.total_seconds() + 0.1 if stale < timedelta(minutes=1) else 0)
        result = collect_garbage(lake.catalog, grace=timedelta(0), stale_after=stale)
        assert not result.failed and not result.unreachable


def named_files(lake) -> set[str]:
    """Every data file a verified replica row names, as the NameNode spells its path."""
    return {fs._arrow(fs.join(r.path, n))[1] for t in lake.catalog.tables.list()
            for p in lake.catalog.reads.replicas(t.qualified_name)[1] for b in p.buckets for r in b
            for n, _ in r.files or ()}


def data_files(lake) -> set[str]:
    return set().union(*(files_under(b.root_uri) for b in lake.catalog.backends.list() if fs.exists(b.root_uri)))


def test_a_balance_killed_after_each_step_and_a_killed_write_lose_nothing_on_hdfs(hdfs_lake):
    lake = hdfs_lake
    for i, table in enumerate(("orders", "lines")):
        lake.create(table, buckets=8)
        lake.write(table, DAY, range(i, i + 160))
    before = ({t: rows(lake.catalog, t) for t in ("orders", "lines")}, fingerprint(lake.catalog))
    for n, step in enumerate(STEPS, start=4):
        lake.add_backend(f"be{n}")  # 16 slots on n backends: each new one takes buckets
        with pytest.raises(Killed):
            lake.run(on_step=kill_at(step))
        summary = lake.run()
        assert summary["groups"][0]["stable"], (step, summary)
        assert_whole(lake.catalog)
        assert ({t: rows(lake.catalog, t) for t in ("orders", "lines")}, fingerprint(lake.catalog)) == before, step
    collect(lake)
    assert data_files(lake) == named_files(lake)  # the drops ran and gc left nothing behind

    # a write of 16 files x 2 replicas killed after `placed` of them, the next one staged but not renamed
    good = rows(lake.catalog, "default.orders")
    committed = data_files(lake)
    real = copy_mod.publish
    left = 0
    for killed, placed in enumerate((0, 5), start=1):
        count = [0]

        def dying(staged, placed=placed):
            if count[0] == placed:
                raise KeyboardInterrupt(f"killed after {placed} files")  # as a kill: no cleanup of its tmp file
            count[0] += 1
            return real(staged)

        copy_mod.publish = dying
        try:
            with pytest.raises(KeyboardInterrupt):
                lake.write("orders", DAY, range(1000, 1160))  # an overwrite of the committed day
        finally:
            copy_mod.publish = real
        assert len(temporaries(lake)) == killed, temporaries(lake)  # the staged copy each kill left behind
        assert rows(lake.catalog, "default.orders") == good
        left += placed
        assert len(data_files(lake) - committed) == left  # the files each killed write placed
    collect(lake, stale=timedelta(seconds=1))
    assert data_files(lake) == committed
    assert temporaries(lake) == set()
    lake.write("orders", DAY, range(1000, 1160))
    assert rows(lake.catalog, "default.orders") == {DAY: sorted((k, f"orders-{DAY}-{k}") for k in range(1000, 1160))}
    assert_whole(lake.catalog)
