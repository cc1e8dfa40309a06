"""Issue 31: a query's fixed cost is cut without checking less.

The replica check lists each directory once and a partition's buckets as one task
(spark.listing): it must judge every directory exactly as storage.replica_dir.check_replica does. The
driver's phases are recorded (spark.timing). And one session running several queries, with a
commit, a corrupted replica and a backend marked down between them, sees each change in the very
next query: nothing the session keeps (the registration, the parsed query's shape, the context's
settings, the views' listed partitions) may hide one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from colocate_testing import add_local_backends

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReadReplica, Source
from airflow_colocate.jobs.join import finish_join, prepare_join
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.join_job import run_join
from airflow_colocate.spark import listed_views, listing
from airflow_colocate.spark.listing import judge_replicas
from airflow_colocate.spark.timing import DriverClock, phases_line
from airflow_colocate.storage.replica_dir import check_replica

DAY = "2026-11-01"
COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]
COUNT = "SELECT o.id, l.v FROM orders o JOIN lines l ON o.dt = l.dt AND o.id = l.id"  # rows: the join's
TABLES = {"orders": [DAY], "lines": [DAY]}


def _replicas(root: Path) -> list[ReadReplica]:
    """Two partitions of four bucket directories, each bucket dir in a different state."""
    out = []
    for part in ("2026-11-01", "2026-11-02"):
        for b in range(4):
            d = root / part / "v000001" / f"b{b:05d}"
            d.mkdir(parents=True)
            (d / f"part-{b}.parquet").write_bytes(b"x" * (10 + b))
            out.append(ReadReplica(replica_id=len(out), backend_id=1, path=d.as_uri(), bytes=10 + b,
                                   files=[[f"part-{b}.parquet", 10 + b]]))
    p1 = root / "2026-11-02" / "v000001"
    (p1 / "b00000" / "part-0.parquet.colocate-tmp").write_bytes(b"t")  # a killed copy's leftover
    os.mkdir(p1 / "b00001" / "nested")  # Spark reads below a directory too
    (p1 / "b00002" / "part-2.parquet").write_bytes(b"short")  # truncated
    (p1 / "b00003" / "part-3.parquet").unlink()  # missing
    (p1 / "b00003" / "other.parquet").write_bytes(b"y")
    gone = root / "2026-11-03" / "v000001" / "b00000"
    out.append(ReadReplica(replica_id=99, backend_id=1, path=gone.as_uri(), bytes=1, files=[["a.parquet", 1]]))
    legacy = root / "2026-11-01" / "v000001" / "b00001"  # recorded before 0.2: total bytes only
    out.append(ReadReplica(replica_id=100, backend_id=1, path=legacy.as_uri(), bytes=11, files=None))
    out.append(ReadReplica(replica_id=101, backend_id=1, path=legacy.as_uri(), bytes=12, files=None))
    return out


@pytest.mark.parametrize("threads, slow", [(1, False), (8, False), (8, True)])
def test_the_listing_judges_every_directory_as_check_replica_does(tmp_path, monkeypatch, threads, slow):
    if slow:  # a disk slower than SLOW_LISTING a directory (a network mount): local groups on threads too
        monkeypatch.setattr(listing, "SLOW_LISTING", -1.0)
    replicas = _replicas(tmp_path)
    want = [check_replica(r.path, files=r.files, size=r.bytes) for r in replicas]
    assert judge_replicas(replicas, threads) == want
    assert want[:4] == [None] * 4 and all(w for w in want[4:-2]) and want[-2] is None and want[-1]
    assert "unknown file" in want[4] and "unknown directory nested" in want[5] and "holds 5 bytes" in want[6]
    assert "missing file part-3.parquet" in want[7] and want[8] == "its directory is gone"


def test_the_clock_adds_a_phase_up_and_leaves_the_run_out_of_the_fixed_cost():
    clock = DriverClock.start()
    for name in ("catalog", "run", "catalog"):
        with clock.phase(name):
            time.sleep(0.01)
    assert list(clock.phases) == ["catalog", "run"]
    assert clock.phases["catalog"].wall >= 0.02 and clock.phases["catalog"].jvm is None
    assert clock.fixed().wall == clock.phases["catalog"].wall
    line = clock.line()
    assert line.startswith("driver phases: catalog ") and " ms (cpu: python " in line and "; run " in line
    assert phases_line({"check": (0.03, 0.01, 0.02)}) == "driver phases: check 30 ms = 30 ms (cpu: python 10 ms, jvm 20 ms)"


def _write(spark, cat, tmp_path: Path, table: str, ids: list[int]) -> None:
    src = tmp_path / "src" / f"{table}-{ids[-1]}-{len(ids)}"
    src.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{table}{k}" for k in ids]}), src / "d.parquet")
    write_in_session(spark, cat, table, DAY, Source(format="parquet", path=str(src)), work_dir=tmp_path / "runs")


def _query(spark, cat, work: Path) -> tuple[dict, DriverClock]:
    clock = DriverClock.start(spark)
    with clock.phase("catalog"):
        plan, ticket = prepare_join(cat, COUNT, TABLES, work_dir=work)
    report = run_join(spark, plan, clock=clock)
    return finish_join(cat, ticket, report), clock


def _indexes(spark, plan) -> list[int]:
    """The identities of the file indexes a JVM logical plan's relations read (its leaves)."""
    leaves = plan.collectLeaves()
    return [spark._jvm.java.lang.System.identityHashCode(leaves.apply(i).relation().location())
            for i in range(leaves.size())]


def _view_index(spark, view: str) -> int:
    """The file index the listed view ``view`` stored (spark.listed_views): one, listed in memory."""
    raw = listed_views.raw_view(spark, view)
    assert listed_views.made_here(spark, view) is not None and listed_views.view_text(raw) == ""
    assert raw.plan().get().collectLeaves().apply(0).relation().location().getClass().getSimpleName() == "InMemoryFileIndex"
    (index,) = _indexes(spark, raw.plan().get())
    return index


@pytest.mark.spark
def test_one_session_sees_a_commit_a_bad_replica_and_a_backend_down_in_the_next_query(spark, tmp_path):
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest")
    cat.init()
    backends = add_local_backends(cat, tmp_path / "backends")
    for table in ("orders", "lines"):
        cat.tables.create(table, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"],
                         colocate_with="g_cost")
    _write(spark, cat, tmp_path, "orders", list(range(1000)))
    _write(spark, cat, tmp_path, "lines", list(range(0, 2000, 2)))
    work = tmp_path / "work"

    first, clock = _query(spark, cat, work)
    assert first["rows"] == 500 and first["colocate"]
    assert {"catalog", "plan", "check", "views", "run", "explain"} <= set(clock.phases)
    listed = {v: _view_index(spark, v) for v in ("orders", "lines")}
    again, _ = _query(spark, cat, work)  # the same replicas: the registration is reused, the count the same
    assert again["rows"] == 500
    assert {v: _view_index(spark, v) for v in ("orders", "lines")} == listed  # not listed again
    # and a query plans over the views' own indexes: Spark does not list the replica directories again
    assert sorted(_indexes(spark, spark.sql(COUNT)._jdf.queryExecution().optimizedPlan())) == sorted(listed.values())

    _write(spark, cat, tmp_path, "lines", list(range(1000)))  # a commit: a new visible version
    after_commit, _ = _query(spark, cat, work)
    assert after_commit["rows"] == 1000
    assert _view_index(spark, "orders") == listed["orders"] and _view_index(spark, "lines") != listed["lines"]

    # a stray file in a replica the last query read: the next query reads the bucket's other replica
    read = cat.reads.replicas("orders", [DAY])[1][0].buckets[0][0]
    Path(read.path.removeprefix("file://"), "part-99999-stray.c000.snappy.parquet").write_bytes(b"PAR1")
    after_stray, _ = _query(spark, cat, work)
    assert after_stray["rows"] == 1000
    assert [(b["table"].split(".")[-1], b["bucket"], b["path"]) for b in after_stray["bad_replicas"]] == [
        ("orders", 0, read.path)]
    assert after_stray["marked_bad"]
    assert _view_index(spark, "orders") != listed["orders"]  # listed again, without the bad replica
    left = cat.reads.replicas("orders", [DAY])[1][0].buckets[0]
    assert read.path not in {r.path for r in left}

    # a backend down (not the one holding orders' last good bucket 0): the group is not read colocated
    down = next(b for b in backends if b.id not in {r.backend_id for r in left})
    cat.backends.set_state(down.id, "down", reason="pulled")
    after_down, _ = _query(spark, cat, work)
    assert after_down["rows"] == 1000 and not after_down["colocate"]
    assert "group is not stable" in " ".join(j["reason"] or "" for j in after_down["joins"])
    cat.dispose()
