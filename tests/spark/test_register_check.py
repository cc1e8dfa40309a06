"""Registration checks each bucket's replica directory against the files the catalog recorded and
falls back to the next replica; with none left it fails naming the bucket (issue 18 and 19).
Real directories; no Spark needed for the check itself."""

from __future__ import annotations

import os

import pytest

from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable
from airflow_colocate.spark.register import UnreadableBuckets, check_candidates


def _replica(tmp_path, backend: int, bucket: int, files: dict[str, bytes]) -> str:
    d = tmp_path / f"be{backend}" / "default" / "t_1" / "2026-11-01" / "v000001" / f"b{bucket:05d}"
    d.mkdir(parents=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d.as_uri()


def _table(tmp_path, buckets=2, recorded=True):
    """Two buckets, each with replicas on backends 1 and 2 holding the same files."""
    cands = []
    for b in range(buckets):
        files = {f"part-00000-w_{b:05d}.c000.snappy.parquet": os.urandom(100 + b)}
        row = []
        for be in (1, 2):
            path = _replica(tmp_path, be, b, files)
            row.append(ReadReplica(replica_id=10 * be + b, backend_id=be, path=path, bytes=sum(map(len, files.values())),
                                   files=[[n, len(d)] for n, d in files.items()] if recorded else None))
        cands.append(row)
    part = ReadPartition(value="2026-11-01", bucket_paths=[c[0].path for c in cands], candidates=cands)
    return ReadTable(name="t", columns=[["id", "bigint"], ["dt", "date"]], dist_cols=["id"], partition_cols=["dt"],
                     bucket_num=buckets, partitions=[part], table="default.t")


def _dir(uri: str):
    return uri.removeprefix("file://")


def test_exact_replicas_are_registered_as_chosen(tmp_path):
    table = _table(tmp_path)
    got = check_candidates([table])
    assert got.bad == [] and got.checked == 2
    (part,) = got.tables[0].partitions
    assert part.bucket_paths == table.partitions[0].bucket_paths and part.candidates == []


@pytest.mark.parametrize("recorded", [True, False])
def test_a_replica_holding_a_temporary_file_is_skipped_and_reported(tmp_path, recorded):
    table = _table(tmp_path, recorded=recorded)
    first = table.partitions[0].candidates[1][0]
    with open(os.path.join(_dir(first.path), "part-00000-w_00001.c000.snappy.parquet.tmp-0123456789ab"), "wb") as f:
        f.write(b"half a copy")
    got = check_candidates([table])
    assert got.tables[0].partitions[0].bucket_paths == [table.partitions[0].bucket_paths[0],
                                                         table.partitions[0].candidates[1][1].path]
    (bad,) = got.bad
    assert (bad.replica_id, bad.table, bad.partition, bad.bucket_seq, bad.backend_id, bad.path) == (
        first.replica_id, "default.t", "2026-11-01", 1, 1, first.path)
    assert "unknown file part-00000-w_00001.c000.snappy.parquet.tmp-0123456789ab (a temporary copy)" in bad.reason


def test_missing_and_short_files_are_bad_and_the_other_replica_is_read(tmp_path):
    table = _table(tmp_path)
    c = table.partitions[0].candidates
    os.remove(os.path.join(_dir(c[0][0].path), c[0][0].files[0][0]))
    with open(os.path.join(_dir(c[1][0].path), c[1][0].files[0][0]), "r+b") as f:
        f.truncate(0)
    got = check_candidates([table])
    assert got.tables[0].partitions[0].bucket_paths == [c[0][1].path, c[1][1].path]
    reasons = {b.bucket_seq: b.reason for b in got.bad}
    assert reasons == {0: f"missing file {c[0][0].files[0][0]}",
                       1: f"file {c[1][0].files[0][0]} holds 0 bytes, the catalog recorded {c[1][0].files[0][1]}"}


def test_no_exact_replica_left_fails_with_one_line_naming_the_bucket(tmp_path):
    table = _table(tmp_path)
    c = table.partitions[0].candidates[1]
    os.remove(os.path.join(_dir(c[0].path), c[0].files[0][0]))
    with open(os.path.join(_dir(c[1].path), c[1].files[0][0]), "ab") as f:
        f.write(b"more")
    with pytest.raises(UnreadableBuckets) as err:
        check_candidates([table])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("cannot read default.t partition 2026-11-01 bucket 1: no replica holds exactly the files")
    assert f"backend 1 ({c[0].path}): missing file {c[0].files[0][0]}" in message
    assert f"backend 2 ({c[1].path}): file {c[1].files[0][0]} holds {c[1].files[0][1] + 4} bytes" in message
    assert sorted(b.replica_id for b in err.value.bad) == [c[0].replica_id, c[1].replica_id]


def test_empty_buckets_and_plans_without_candidates_are_not_listed(tmp_path):
    table = _table(tmp_path)
    part = table.partitions[0]
    part.bucket_paths[0] = ""  # no rows: not registered, so not read
    os.remove(os.path.join(_dir(part.candidates[0][0].path), part.candidates[0][0].files[0][0]))
    got = check_candidates([table])
    assert got.bad == [] and got.checked == 1
    assert got.tables[0].partitions[0].bucket_paths[0] == ""
    legacy = ReadTable(name="u", columns=[["id", "bigint"]], dist_cols=["id"], partition_cols=[], bucket_num=1,
                       partitions=[ReadPartition(value="all", bucket_paths=["file:///nowhere"])])
    assert check_candidates([legacy]).tables == [legacy]  # a plan from before 0.2 is registered as it is


def test_a_thousand_directories_are_checked_on_threads(tmp_path):
    """What a 30-day x 64-bucket read lists is about 2,000 directories; here 1,024 local ones are
    checked with every answer right (bench/bench_register_check.py times it)."""
    table = _table(tmp_path / "big", buckets=1024)
    got = check_candidates([table], threads=16)
    assert got.bad == [] and got.checked == 1024
    assert got.tables[0].partitions[0].bucket_paths == table.partitions[0].bucket_paths


def test_a_listing_that_lost_a_checked_replicas_file_fails_naming_it(tmp_path):
    """Spark's listing of a registered table against the files the catalog recorded for each
    chosen replica (spark.listing.check_listed): a disk gone between the check and the listing
    lists short (Spark lists a missing partition directory as empty), and that must fail, naming
    the replica, instead of reading the bucket as having no rows."""
    from dataclasses import replace

    from airflow_colocate.spark.listing import check_listed

    planned = _table(tmp_path)
    chosen = check_candidates([planned]).tables[0]
    assert chosen.partitions[0].candidates == []  # the checked table keeps only the chosen paths
    listed = [f"{_dir(p)}/{name}" for p, cands in zip(chosen.partitions[0].bucket_paths, planned.partitions[0].candidates)
              for name, _ in cands[0].files]
    check_listed(chosen, listed, planned)  # exactly the recorded files: fine
    check_listed(chosen, [f"file://{x}" for x in listed], planned)  # any spelling of the directory
    with pytest.raises(FileNotFoundError, match=r"replica .*b00001 of default.t partition 2026-11-01 bucket 1: "
                                                r"Spark listed it without 1 of its 1 recorded files"):
        check_listed(chosen, listed[:1], planned)
    tokens = replace(chosen, partitions=[replace(chosen.partitions[0], bucket_paths=["colocatereplica:///x", ""])])
    check_listed(tokens, [], planned)  # a replica set path: the jar's file system checks its own listing
