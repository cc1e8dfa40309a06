"""spark/failover.py without Spark: which replica an error names, what is retried, when it stops."""

from __future__ import annotations

import pytest

from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable
from airflow_colocate.spark.failover import NoGoodReplica, failed_replica, failure_kind, run_with_failover, without


def _table() -> ReadTable:
    reps = [[ReadReplica(10 * b + i, i + 1, f"file:///be{i + 1}/t/v1/b{b:05d}", 100) for i in range(2)] for b in range(2)]
    return ReadTable(name="t", columns=[["k", "bigint"], ["dt", "date"]], dist_cols=["k"], partition_cols=["dt"],
                     bucket_num=2, table="db.t",
                     partitions=[ReadPartition("2026-11-01", [c[0].path for c in reps], candidates=reps)])


CRC = ("An error occurred while calling o1.collect.\n: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] "
       "Encountered error while reading file colocatefile:///be2/t/v1/b00001/part-0.parquet. SQLSTATE: KD001\n"
       "Caused by: org.apache.parquet.io.ParquetDecodingException: could not verify page integrity, CRC checksum "
       "verification failed")


def test_the_replica_an_error_names_and_its_reason():
    t = _table()
    (key, replica, reason) = failed_replica(RuntimeError(CRC), [t])
    assert key == (0, 0, 1) and replica.replica_id == 11  # the colocatefile:// spelling of be2's b00001
    assert reason.startswith("read failed: [FAILED_READ_FILE.NO_HINT]") and "CRC checksum" in reason
    guard = RuntimeError("colocate: table db.t partition 2026-11-01 bucket 0 (replica file:///be1/t/v1/b00000) "
                         "holds a row of bucket 1 (a corrupt replica): the query stops … SQLSTATE: P0001")
    (key, replica, reason) = failed_replica(guard, [t])
    assert key == (0, 0, 0) and replica.replica_id == 0
    assert reason == ("read failed: colocate: table db.t partition 2026-11-01 bucket 0 (replica file:///be1/t/v1/b00000) "
                      "holds a row of bucket 1 (a corrupt replica)")
    # not a read failure, or not one of ours: not failed over
    assert failed_replica(RuntimeError("executor lost reading file:///be1/t/v1/b00000/x"), [t]) is None
    assert failed_replica(RuntimeError(CRC.replace("be2", "elsewhere")), [t]) is None
    assert [failure_kind(r) for r in (reason, "read failed: … CRC checksum verification failed", "missing file a",
                                      "file a holds 3 bytes, the catalog recorded 9", "x")] == [
        "wrong_bucket", "checksum", "missing", "size", "read"]


def test_retries_with_the_next_replica_then_stops_naming_every_replica_tried():
    t = _table()
    seen = []

    def attempt(tables):
        path = tables[0].partitions[0].bucket_paths[1]
        seen.append(path)
        if "be2" in path:
            raise RuntimeError(CRC)
        return "rows"

    # bucket 1 reads be1 first: no failure
    assert run_with_failover([t], attempt)[0] == "rows" and seen == ["file:///be1/t/v1/b00001"]
    flipped = without([t], {10})  # be1's replica of bucket 1 excluded: be2 is first
    seen.clear()
    with pytest.raises(NoGoodReplica) as err:
        run_with_failover(flipped, attempt)
    assert seen == ["file:///be2/t/v1/b00001"]
    assert str(err.value).startswith("cannot read db.t partition 2026-11-01 bucket 1: every replica failed")
    assert "backend 2 (file:///be2/t/v1/b00001): read failed: " in str(err.value)
    assert [b.replica_id for b in err.value.bad] == [11]
    # other errors pass unchanged, with what was learnt before attached for the control plane
    calls = []

    def then_other(tables):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(CRC.replace("be2", "be1").replace("b00001", "b00000"))
        raise ValueError("boom")

    with pytest.raises(ValueError) as other:
        run_with_failover([t], then_other)
    assert [b.replica_id for b in other.value.bad] == [0]


def test_a_replica_set_path_in_an_error_names_the_replica_it_reads_first():
    """Backends in several buckets are registered as replica sets (spark.replica_paths): the error
    names the set's token, not a replica directory, and the replica read first is the one failed."""
    from airflow_colocate.spark.replica_paths import first_replicas, remote_stores, token_path, with_replica_sets

    t = _table()
    sets = with_replica_sets([t], [t], [], {})[0]
    path = sets.partitions[0].bucket_paths[1]
    assert path.startswith("colocatereplica:///") and first_replicas(path) == [10]
    error = RuntimeError(CRC.replace("colocatefile:///be2/t/v1/b00001", path.replace(":///", ":/")))  # Hadoop's spelling
    (key, replica, _) = failed_replica(error, [t])
    assert key == (0, 0, 1) and replica.replica_id == 10  # be1's b00001, the set's first
    # the set's order is the reads' order: be2's first when be2's replica was the one checked
    swapped = token_path(("db.t", "2026-11-01", 1), list(reversed(t.partitions[0].candidates[1])), {}, lambda p: p)
    assert first_replicas(f"file {swapped}/part-0.parquet is not a Parquet file") == [11]
    assert first_replicas("colocatereplica:///notatokenatallbutlongenough") == []
    s3 = ReadTable(name="s", columns=t.columns, dist_cols=["k"], partition_cols=["dt"], bucket_num=2,
                   partitions=[ReadPartition("2026-11-01", ["s3a://one/be1/x", "s3a://two/be2/y"])])
    assert remote_stores(s3) == {("s3a", "one"), ("s3a", "two")} and remote_stores(t) == set()
