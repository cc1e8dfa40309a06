"""Issue 13, bucket integrity: a replica tampered in place never yields a wrong row, ``colocate
verify`` finds it, balance repairs it from a good replica, and the group is stable again.

Tampered four ways: a bucket file replaced by another bucket's rows (valid parquet), a byte flipped
inside a data page, a file truncated (tests/joins/test_missing_files.py also shows the read falling
back to the other replica for it), and a writer that put rows in the wrong bucket (the catalog's checksums match the wrong files, so only the row check and
the on-read guard can tell). The data is written by the real Spark write job, the joins and
verifies run in the test's Spark session, balance clones with the Spark clone job."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from balance_lake import assert_whole
from colocate_testing import spark_bucket

from airflow_colocate.cli import main
from airflow_colocate.core.contract import (
    RowCheck,
    RowCheckResult,
    Source,
    VerifyReport,
    VerifyResult,
)
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.join import join_in_session, prepare_join
from airflow_colocate.jobs.verify import session_runner, verdicts, verify
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.entry import failure_line
from airflow_colocate.spark.join_job import run_join
from airflow_colocate.spark.verify_job import dir_key, judge
from airflow_colocate.storage import fs

pytestmark = pytest.mark.spark

DAY = "2026-11-01"
QUERY = "SELECT o.id, o.v AS ov, l.v AS lv FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.id = l.id"
TABLES = {"orders": [DAY], "lineitem": [DAY]}
KEYS = {"orders": range(0, 400), "lineitem": range(0, 800, 2)}
EXPECTED = sorted((k, f"orders-{k}", f"lineitem-{k}") for k in range(0, 400, 2))


@pytest.fixture
def lake(spark_lake, spark, tmp_path):
    """orders and lineitem (4 buckets, 2 replicas) in group g on be1..be3, written by Spark."""
    spark_lake.create("orders")
    spark_lake.create("lineitem")
    for table, keys in KEYS.items():
        src = tmp_path / "src" / table
        src.mkdir(parents=True)
        keys = list(keys)
        pq.write_table(pa.table({"id": pa.array(keys, pa.int64()), "v": [f"{table}-{k}" for k in keys],
                                 "dt": pa.array([date(2026, 11, 1)] * len(keys), pa.date32())}), src / "part.parquet")
        write_in_session(spark, spark_lake.catalog, table, DAY, Source(format="parquet", path=str(src)),
                         work_dir=spark_lake.work)
    assert spark_lake.catalog.health.check_group("g").stable
    return spark_lake


def data_file(replica: str) -> Path:
    (name,) = [p for p in Path(fs.local_path(replica)).iterdir() if p.name.endswith(".parquet")]
    return name


def chosen(lake, table: str, bucket: int) -> str:
    """The replica a colocated join reads for ``bucket`` of ``table`` now."""
    plan, _ = prepare_join(lake.catalog, QUERY, TABLES, work_dir=lake.work)
    (t,) = [t for t in plan.tables if t.name == table]
    assert t.bucketed
    return t.partitions[0].bucket_paths[bucket]


def spark_join(spark, lake, tmp_path, *, guard: bool = True) -> tuple[list | None, str | None, list]:
    """Run the join job as spark-submit would (nothing recorded in the catalog): its rows, or the
    error it failed with; and the replicas its read check found bad."""
    out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
    plan, _ = prepare_join(lake.catalog, QUERY, TABLES, work_dir=lake.work, output_path=out.as_uri())
    for t in plan.tables:
        t.bucket_guard = guard
    try:
        report = run_join(spark, plan)
    except Exception as exc:
        return None, failure_line(plan, exc), []  # the one line the operator raises
    got = sorted(tuple(r) for r in spark.read.parquet(out.as_uri()).select("id", "ov", "lv").collect())
    return got, None, [b.path for b in report.bad_replicas]


def joined(spark, lake) -> tuple[list, dict]:
    summary = join_in_session(spark, lake.catalog, QUERY, TABLES, work_dir=lake.work)
    rows = spark.sql(QUERY).collect()  # the tables stay registered as the join read them
    return sorted(tuple(r) for r in rows), summary


def buckets_with_rows(n: int = 4) -> list[int]:
    return sorted({spark_bucket(k, n) for k in KEYS["orders"]})


def repaired(spark, lake) -> None:
    """Balance repairs the bad replicas from a good one; the group is whole and the join colocated."""
    summary = lake.run()
    assert any(j.kind == "repair" and j.state == "done" for j in summary["jobs"]), summary
    assert_whole(lake.catalog)  # stable, every replica where the map says, every file hashing right
    rows, out = joined(spark, lake)
    assert out["colocate"], out["explain"]
    assert rows == EXPECTED


def test_a_replica_holding_another_buckets_rows(lake, spark, tmp_path):
    """Bucket b's file of the replica the colocated join reads is replaced by bucket c's rows."""
    cat = lake.catalog
    b, c = buckets_with_rows()[:2]
    victim = chosen(lake, "orders", b)
    shutil.copyfile(data_file(chosen(lake, "orders", c)), data_file(victim))

    # the join never returns a wrong row: the read check or the guard refuses the file
    rows, error, found = spark_join(spark, lake, tmp_path)
    if rows is None:
        assert "holds a row of bucket" in error and "default.orders" in error, error
    else:
        assert rows == EXPECTED and victim in found

    summary = verify(cat, session_runner(spark), group="g", work_dir=lake.work)
    assert [(x["table"], x["bucket"], x["path"]) for x in summary["bad"]] == [("default.orders", b, victim)]
    assert summary["replicas"] == 16 and summary["marked_bad"] == [victim]
    (g,) = summary["groups"]
    assert not g["stable"] and f"default.orders/{DAY} v1 bucket {b} on backend be" in g["reason"] and "(bad)" in g["reason"]

    rows, out = joined(spark, lake)  # unstable: the fallback reads the good replica
    assert not out["colocate"] and "not stable" in out["explain"]
    assert rows == EXPECTED
    repaired(spark, lake)


def test_a_flipped_byte_fails_the_read_not_a_value(lake, spark, tmp_path):
    """One byte inside a data page of the replica the join reads: its size is right (the read
    check cannot see it); parquet's page checksum, verified on read, fails that read, and the
    bucket is read from its other replica (spark/failover.py)."""
    cat = lake.catalog
    b = buckets_with_rows()[0]
    victim = chosen(lake, "orders", b)
    f = data_file(victim)
    meta = pq.ParquetFile(f).metadata
    col = next(meta.row_group(0).column(i) for i in range(meta.num_columns) if meta.row_group(0).column(i).path_in_schema == "v")
    data = bytearray(f.read_bytes())
    at = col.data_page_offset + col.total_compressed_size // 2  # well past the page header
    data[at] ^= 0x20
    f.write_bytes(bytes(data))

    rows, error, _ = spark_join(spark, lake, tmp_path, guard=False)
    assert error is None or "checksum" not in error.lower()  # parquet does not check by default
    rows, error, found = spark_join(spark, lake, tmp_path)  # the checksum fails: the other replica is read
    assert error is None and rows == EXPECTED and found == [victim], (error, found)

    summary = verify(cat, session_runner(spark), group="g", work_dir=lake.work)
    assert [(x["table"], x["bucket"], x["path"]) for x in summary["bad"]] == [("default.orders", b, victim)]
    assert "checksum" in summary["bad"][0]["reason"]
    assert not cat.health.check_group("g").stable
    rows, out = joined(spark, lake)
    assert not out["colocate"] and rows == EXPECTED
    repaired(spark, lake)


def test_a_truncated_file(lake, spark, tmp_path):
    """Half of one data file of the replica the join reads is cut off: the read check (sizes
    against the catalog) keeps the join from it, verify's re-hash finds it, balance repairs it."""
    cat = lake.catalog
    b = buckets_with_rows()[0]
    victim = chosen(lake, "orders", b)
    f = data_file(victim)
    size = f.stat().st_size
    with open(f, "r+b") as out:
        out.truncate(size // 2)

    rows, error, found = spark_join(spark, lake, tmp_path)
    assert error is None and rows == EXPECTED and found == [victim], (error, found)

    summary = verify(cat, session_runner(spark), group="g", work_dir=lake.work)
    assert [(x["table"], x["bucket"], x["path"]) for x in summary["bad"]] == [("default.orders", b, victim)]
    assert not cat.health.check_group("g").stable
    rows, out = joined(spark, lake)
    assert not out["colocate"] and rows == EXPECTED
    repaired(spark, lake)


def test_rows_in_the_wrong_bucket_with_right_checksums(lake, spark, tmp_path, monkeypatch):
    """A writer put bucket c's keys into bucket b (both replicas, checksums recorded as written):
    the bytes are 'right', Spark's bucketed join would be silently wrong; the guard stops it and
    verify's row check marks both replicas bad."""
    import balance_lake

    cat = lake.catalog
    b, c = buckets_with_rows()[:2]
    wrong = lambda k, n: b if spark_bucket(k, n) == c else spark_bucket(k, n)  # noqa: E731
    monkeypatch.setattr(balance_lake, "spark_bucket", wrong)
    lake.write("orders", DAY, KEYS["orders"])  # a new version, the pyarrow writer
    monkeypatch.undo()
    assert cat.health.check_group("g").stable  # nothing a catalog check can see
    expected = sorted((k, f"orders-{DAY}-{k}", f"lineitem-{k}") for k in range(0, 400, 2))  # the lake writer's values

    rows, error, _ = spark_join(spark, lake, tmp_path, guard=False)
    assert rows is not None and len(rows) < len(expected) and set(rows) < set(expected)  # what the guard is for
    rows, line, _ = spark_join(spark, lake, tmp_path)  # the operator's one line: both replicas tried
    assert line.startswith(f"cannot read default.orders partition {DAY} bucket {b}: every replica failed"), line
    assert line.count(f"colocate: table default.orders partition {DAY} bucket {b} (replica ") == 2
    assert f"/b{b:05d}) holds a row of bucket {c}" in line

    summary = verify(cat, session_runner(spark), table="orders", work_dir=lake.work)
    bad = summary["bad"]
    assert sorted(x["bucket"] for x in bad) == [b, b] and summary["replicas"] == 8
    assert all(x["reason"].startswith("bucket check: ") and f"of bucket {c}" in x["reason"] for x in bad)
    (g,) = summary["groups"]
    assert not g["stable"]
    with pytest.raises(ColocateError, match=f"bucket {b} has no verified replica"):  # no good copy left to read
        join_in_session(spark, cat, QUERY, TABLES, work_dir=lake.work)

    lake.write("orders", DAY, KEYS["orders"])  # rewritten right: the bad version is superseded
    assert cat.health.check_group("g").stable
    rows, out = joined(spark, lake)
    assert out["colocate"] and rows == expected
    assert verify(cat, session_runner(spark), group="g", work_dir=lake.work)["bad"] == []


def test_verify_cli(lake, spark, tmp_path, capsys):
    cat = lake.catalog
    url = str(cat.engine.url)
    b, c = buckets_with_rows()[:2]
    victim = chosen(lake, "lineitem", b)
    shutil.copyfile(data_file(chosen(lake, "lineitem", c)), data_file(victim))
    events = len(cat.events(limit=1000))

    def cli(*argv):
        code = main(["--catalog", url, *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    for argv, why in ((["verify", "--group", "nope"], "unknown colocation group 'nope'"),
                      (["verify", "--limit", "0"], "invalid limit 0"),
                      (["verify", "--table", "nope"], "nope"),
                      (["verify", "--group", "g", "--frobnicate"], "unrecognized arguments: --frobnicate")):
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and why in err, (argv, err)
    assert len(cat.events(limit=1000)) == events and cat.health.check_group("g").stable

    code, out, err = cli("verify", "--table", "orders", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["replicas"] == 8 and doc["bad"] == [] and doc["rows"] == 800

    code, out, err = cli("verify", "--group", "g")
    assert code == 0, err
    assert "verified 16 replicas" in out and "; 1 bad" in out
    assert victim in out and "| false" in out
    assert cat.health.check_group("g").stable is False


def test_verdicts_and_judges():
    """The pure parts: a replica is good only when its bytes and its rows are."""
    report = VerifyReport("v", hashes=[VerifyResult(1, True, 10, "x"), VerifyResult(2, False, error="sum")],
                          rows=[RowCheckResult(1, False, 5, 2, "bucket check: 2 wrong"), RowCheckResult(3, True, 4)],
                          seconds=0.0, bytes=10, spark_version="t")
    got = {r.replica_id: (r.ok, r.error) for r in verdicts(report)}
    assert got == {1: (False, "bucket check: 2 wrong"), 2: (False, "sum"), 3: (True, None)}
    check = RowCheck(7, "file:///x/b00001", "2026-11-01", 1, 10)
    assert judge(check, {1: 10}, "db.t").ok
    wrong = judge(check, {1: 7, 3: 3}, "db.t")
    assert not wrong.ok and wrong.wrong == 3 and "3 of bucket 3" in wrong.error and "db.t/2026-11-01 bucket 1" in wrong.error
    short = judge(check, {1: 9}, "db.t")
    assert not short.ok and "holds 9 rows, the catalog recorded 10" in short.error
    assert dir_key("file:///x/a%20b/b00001/") == dir_key("file:/x/a b/b00001") == "file:/x/a b/b00001"
    assert dir_key("s3a://lake/be1/t/b00001") == "s3a://lake/be1/t/b00001"
