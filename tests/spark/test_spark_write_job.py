"""The write job end to end on local backends: bucket ids file by file, replicas, read-back."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import hashlib
import json
import logging
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import make_plan, read_table, version_files

from airflow_colocate.core.contract import Source, WritePlan, WriteReport
from airflow_colocate.core.errors import ColocateError, SchemaMismatch
from airflow_colocate.spark.entry import main, run_plan
from airflow_colocate.spark.register import register_tables
from airflow_colocate.spark.write_job import run_write
from airflow_colocate.storage import fs, layout
from airflow_colocate.storage.plan_files import load_report, save_plan

pytestmark = pytest.mark.spark

COLUMNS = [["key", "bigint"], ["name", "string"], ["amount", "decimal(12,2)"], ["day", "date"], ["dt", "date"]]
N = 20_000


def source_table(n: int = N, start: int = 0) -> pa.Table:
    keys = list(range(start, start + n))
    return pa.table(
        {
            "key": pa.array(keys, pa.int64()),
            "name": pa.array([None if k % 7 == 0 else f"n{k % 1000}" for k in keys], pa.string()),
            "amount": pa.array(
                [None if k % 11 == 0 else decimal.Decimal(k % 100000) / 100 for k in keys], pa.decimal128(12, 2)
            ),
            "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=k % 300) for k in keys], pa.date32()),
        }
    )


def write_parquet(path: Path, table: pa.Table) -> str:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "part-0.parquet")
    return path.as_uri()


def sha(path: str) -> str:
    return hashlib.sha256(Path(fs.local_path(path)).read_bytes()).hexdigest()


def assert_same_rows(spark, a, b) -> None:
    """Equal as multisets: counts equal and exceptAll empty both ways (one job for both)."""
    assert a.count() == b.count()
    assert a.exceptAll(b).unionAll(b.exceptAll(a)).count() == 0


def assert_bucket_files(spark, report: WriteReport, bucket_num: int, key_sql: str) -> None:
    """Every row of every primary bucket file, read alone, has pmod(hash(key), n) == its bucket."""
    seen = set()
    for r in report.replicas:
        if r.bucket_seq in seen:
            continue  # the other replicas are byte copies (checked by checksum)
        seen.add(r.bucket_seq)
        for name in r.files:
            assert name.endswith(f"_{r.bucket_seq:05d}.c000.snappy.parquet")
            got = {
                row.b
                for row in spark.read.parquet(fs.join(r.path, name))
                .selectExpr(f"pmod(hash({key_sql}), {bucket_num}) AS b")
                .collect()
            }
            assert got == {r.bucket_seq}, (name, got)


@pytest.fixture(scope="module")
def orders(spark, tmp_path_factory):
    """The main table written once: 20k rows, 8 buckets, 2 replicas over 3 backends."""
    tmp = tmp_path_factory.mktemp("orders")
    src = write_parquet(tmp / "src", source_table())
    plan = make_plan(tmp, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    report = run_plan(spark, plan)  # run_write, then the report written as the job does
    return tmp, plan, report, src


def test_write_buckets_replicas_and_read_back(spark, orders):
    tmp, plan, report, src = orders
    assert report.source_rows == N
    assert len(report.replicas) == 8 * 2
    assert sum(r.rows for r in report.replicas) == 2 * N
    # the report was written atomically, the staging directory is gone
    assert load_report(WriteReport, plan.report_uri) == report
    assert not fs.exists(plan.staging_uri)

    assert_bucket_files(spark, report, 8, "key")

    # each bucket lives on exactly the mapped backends, byte-identical, with the reported checksum
    backends_root = tmp / "backends"
    for b in plan.buckets:
        mapped = {r.backend_id for r in b.replicas}
        on_disk = {
            int(p.name[2:])
            for p in backends_root.iterdir()
            if Path(fs.local_path(layout.replica_dir(p.as_uri(), "db", "orders", 1, plan.partition_value, 1, b.bucket_seq))).exists()
        }
        assert on_disk == mapped, b.bucket_seq
        reps = [r for r in report.replicas if r.bucket_seq == b.bucket_seq]
        assert [r.backend_id for r in reps] == [r.backend_id for r in b.replicas]
        digests = []
        for r in reps:
            files = sorted(os.listdir(fs.local_path(r.path)))
            assert files == r.files and len(files) == 1
            digests.append([sha(fs.join(r.path, f)) for f in files])
            from airflow_colocate.storage.replica_dir import replica_checksum

            assert replica_checksum(list(zip(files, digests[-1]))) == r.checksum
            assert r.bytes == sum(os.path.getsize(fs.local_path(fs.join(r.path, f))) for f in files)
        assert all(d == digests[0] for d in digests)
        assert len({r.checksum for r in reps}) == 1

    # read back through register_tables, alternating replicas
    register_tables(spark, [read_table(plan, "orders_rb", replica=1, reports=report)])
    expected = spark.read.parquet(src).selectExpr("*", f"DATE'{plan.partition_value}' AS dt")
    assert_same_rows(spark, spark.table("orders_rb"), expected)
    assert spark.table("orders_rb").columns == [c[0] for c in COLUMNS]


def test_append_carries_base_files(spark, orders):
    tmp, base_plan, base_report, src = orders
    extra = write_parquet(tmp / "src_append", source_table(500, start=10 * N))
    plan = make_plan(
        tmp, source=Source(format="parquet", path=extra), columns=COLUMNS, dist_cols=["key"],
        version=2, mode="append", base_version=1,
    )
    report = run_write(spark, plan)
    assert report.source_rows == 500
    assert sum(r.rows for r in report.replicas) == 2 * (N + 500)
    base = {(r.bucket_seq, r.backend_id): r for r in base_report.replicas}
    for r in report.replicas:
        old = base[r.bucket_seq, r.backend_id]
        assert set(old.files) <= set(r.files)
        for name in old.files:  # same device: hard-linked, not copied
            a, b = os.stat(fs.local_path(fs.join(old.path, name))), os.stat(fs.local_path(fs.join(r.path, name)))
            assert (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)
    assert len({(r.bucket_seq, r.checksum) for r in report.replicas}) == 8
    assert_bucket_files(spark, report, 8, "key")
    # the base version is untouched
    for r in base_report.replicas:
        assert sorted(os.listdir(fs.local_path(r.path))) == r.files

    register_tables(spark, [read_table(plan, "orders_v2", reports=report)])
    expected = (
        spark.read.parquet(src).unionByName(spark.read.parquet(extra)).selectExpr("*", f"DATE'{plan.partition_value}' AS dt")
    )
    assert_same_rows(spark, spark.table("orders_v2"), expected)


def test_query_source(spark, orders, tmp_path):
    _, base_plan, base_report, _ = orders
    src_table = read_table(base_plan, "orders_src", reports=base_report)
    plan = make_plan(
        tmp_path,
        source=Source(
            query="SELECT key, name, amount, day FROM orders_src WHERE key % 2 = 0",
            tables=[src_table],
        ),
        columns=COLUMNS, dist_cols=["key"], table="even_orders", table_id=2,
    )
    report = run_write(spark, plan)
    assert report.source_rows == N // 2
    assert_bucket_files(spark, report, 8, "key")
    register_tables(spark, [read_table(plan, "even_orders", reports=report)])
    assert_same_rows(spark, spark.table("even_orders"), spark.table("orders_src").where("key % 2 = 0"))


def test_csv_source_in_header_order_with_partition_column(spark, tmp_path):
    rows = source_table(3000).to_pylist()
    path = tmp_path / "src.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["DAY", "dt", "amount", "key", "name"])  # another order and case, dt included
        for r in rows:
            w.writerow([r["day"], "2026-11-01", "" if r["amount"] is None else r["amount"], r["key"], r["name"] or ""])
    plan = make_plan(tmp_path, source=Source(format="csv", path=path.as_uri()), columns=COLUMNS, dist_cols=["key"])
    report = run_write(spark, plan)
    assert report.source_rows == 3000
    assert_bucket_files(spark, report, 8, "key")
    register_tables(spark, [read_table(plan, "orders_csv", reports=report)])
    got = spark.table("orders_csv")
    assert got.where("amount IS NULL").count() == sum(1 for r in rows if r["amount"] is None)
    expected = spark.read.parquet(write_parquet(tmp_path / "expected", source_table(3000))).selectExpr(
        "key", "nullif(name, '') AS name", "amount", "day", "DATE'2026-11-01' AS dt"
    )
    assert_same_rows(spark, got.selectExpr("key", "nullif(name, '') AS name", "amount", "day", "dt"), expected)


def test_json_source_and_compound_key(spark, tmp_path):
    columns = [["key", "bigint"], ["k2", "int"], ["v", "double"], ["dt", "string"]]
    path = tmp_path / "src.json"
    with path.open("w") as f:
        for i in range(4000):
            f.write(json.dumps({"key": i // 3, "k2": i % 3, "v": i / 2}) + "\n")
    plan = make_plan(
        tmp_path, source=Source(format="json", path=path.as_uri()), columns=columns,
        dist_cols=["key", "k2"], value="eu_west", bucket_num=6, table="events",
    )
    report = run_write(spark, plan)
    assert report.source_rows == 4000
    assert_bucket_files(spark, report, 6, "key, k2")
    register_tables(spark, [read_table(plan, "events", reports=report)])
    expected = spark.read.json(path.as_uri()).selectExpr("key", "cast(k2 AS int) AS k2", "v", "'eu_west' AS dt")
    assert_same_rows(spark, spark.table("events"), expected)


def test_main_runs_a_plan_file(spark, tmp_path, capsys):
    src = write_parquet(tmp_path / "src", source_table(1000))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    plan_path = save_plan(plan, tmp_path / "plan.json")
    assert main(["--plan", str(plan_path)]) == 0
    report = load_report(WriteReport, plan.report_uri)
    assert report.source_rows == 1000
    assert "colocate-write: report written" in capsys.readouterr().out
    assert spark.range(1).count() == 1  # the shared session is still alive


def test_in_session_the_job_logs_and_prints_nothing(spark, tmp_path, capsys, caplog):
    """A user's session: the job's lines are log records under airflow_colocate (a caller routes or
    silences them), not prints; only the application (main) shows them on stdout."""
    src = write_parquet(tmp_path / "src", source_table(100))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    with caplog.at_level(logging.INFO, logger="airflow_colocate"):
        run_write(spark, plan)
    assert "colocate-" not in capsys.readouterr().out
    ours = [r for r in caplog.records if r.name == "airflow_colocate.spark.write"]
    assert any(r.getMessage().startswith(f"job {plan.job_id}: overwrite") for r in ours)
    assert any(r.getMessage().startswith("placed ") for r in ours)


def test_main_turns_a_failure_into_one_line(spark, tmp_path, capsys):
    """What the operator raises: exit 1, no report, the reason as one line next to where the report would be."""
    plan = make_plan(tmp_path, source=Source(format="parquet", path=(tmp_path / "nope").as_uri()), columns=COLUMNS,
                     dist_cols=["key"])
    plan_path = save_plan(plan, tmp_path / "plan.json")
    assert main(["--plan", str(plan_path)], kind="write") == 1
    error = fs.read_text(plan.report_uri + ".error")
    assert "\n" not in error and error.startswith("source path ") and "nope does not exist" in error
    assert f"colocate-write: FAILED: {error}" in capsys.readouterr().out
    assert not fs.exists(plan.report_uri) and version_files(plan) == []

    # the same plan once its source exists: the earlier reason is gone with the retry
    write_parquet(tmp_path / "nope", source_table(10))
    assert main(["--plan", str(plan_path)]) == 0
    assert not fs.exists(plan.report_uri + ".error")
    assert load_report(WriteReport, plan.report_uri).source_rows == 10


def test_empty_buckets_get_directories(spark, tmp_path):
    src = write_parquet(tmp_path / "src", source_table(3))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"], bucket_num=16)
    report = run_write(spark, plan)
    empty = [r for r in report.replicas if r.rows == 0]
    assert empty and all(r.files == [] and r.bytes == 0 for r in empty)
    assert all(os.path.isdir(fs.local_path(r.path)) and not os.listdir(fs.local_path(r.path)) for r in empty)
    assert sum(r.rows for r in report.replicas) == 3 * 2


def test_one_bucket_from_a_single_partition_query(spark, tmp_path):
    """bucket_num=1 from a query whose output is one partition (a global sort with a limit):
    Spark plans no hash partitioning for it, and one partition is bucket 0."""
    src = write_parquet(tmp_path / "src", source_table(50))
    query = f"SELECT * FROM parquet.`{src}` ORDER BY key LIMIT 40"
    plan = make_plan(tmp_path, source=Source(query=query), columns=COLUMNS, dist_cols=["key"], bucket_num=1)
    report = run_write(spark, plan)
    assert {r.bucket_seq for r in report.replicas} == {0} and sum(r.rows for r in report.replicas) == 40 * 2


# ---------------------------------------------------------------------- failures


def _fails(spark, plan: WritePlan, match: str, exc=ColocateError):
    with pytest.raises(exc, match=match):
        run_plan(spark, plan)
    assert version_files(plan) == []
    assert not fs.exists(plan.report_uri)


def test_schema_errors_name_column_and_types(spark, tmp_path):
    t = source_table(100)
    bad_type = write_parquet(tmp_path / "bad_type", t.set_column(2, "amount", t["amount"].cast(pa.string())))
    missing = write_parquet(tmp_path / "missing", t.drop_columns(["name"]))
    extra = write_parquet(tmp_path / "extra", t.append_column("color", pa.array(["red"] * 100)))
    narrowing = write_parquet(tmp_path / "narrow", t.set_column(0, "key", t["key"].cast(pa.float64())))

    def plan(src):
        return make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])

    _fails(spark, plan(bad_type), r"column 'amount': source type string cannot be written to table type decimal\(12,2\)", SchemaMismatch)
    _fails(spark, plan(missing), r"column 'name' \(string\) is missing from the source", SchemaMismatch)
    _fails(spark, plan(extra), r"source column 'color' \(string\) is not a column of table db.orders", SchemaMismatch)
    _fails(spark, plan(narrowing), r"column 'key': source type double cannot be written to table type bigint", SchemaMismatch)


def test_widening_is_accepted(spark, tmp_path):
    t = source_table(500)
    widened = t.set_column(0, "key", t["key"].cast(pa.int32())).set_column(
        2, "amount", t["amount"].cast(pa.decimal128(9, 1), safe=False)
    )
    src = write_parquet(tmp_path / "src", widened)
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    report = run_write(spark, plan)
    # the key was cast to bigint before hashing: bucket ids are those of the table type
    assert_bucket_files(spark, report, 8, "key")
    register_tables(spark, [read_table(plan, "widened", reports=report)])
    assert dict(spark.table("widened").dtypes)["key"] == "bigint"


def test_bad_partition_values_and_missing_path(spark, tmp_path):
    t = source_table(100)
    dts = pa.array([dt.date(2026, 11, 1)] * 97 + [dt.date(2026, 11, 2)] * 2 + [None], pa.date32())
    src = write_parquet(tmp_path / "dt", t.append_column("dt", dts))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    _fails(spark, plan, r"partition column 'dt' .* but 3 rows differ \(e\.g\. '(2026-11-02|NULL)'\)")

    # a string partition column is fine when its values are the partition value
    src = write_parquet(tmp_path / "dt_str", t.append_column("dt", pa.array(["2026-11-01"] * 99 + ["2026-11-1x"])))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    _fails(spark, plan, r"but 1 rows differ \(e\.g\. '2026-11-1x'\)")

    plan = make_plan(tmp_path, source=Source(format="parquet", path=(tmp_path / "nope").as_uri()), columns=COLUMNS, dist_cols=["key"])
    _fails(spark, plan, r"source path .*nope does not exist")

    good = write_parquet(tmp_path / "good", t)
    plan = make_plan(tmp_path, source=Source(format="parquet", path=good), columns=COLUMNS, dist_cols=["key"], value="2026-13-45")
    _fails(spark, plan, r"partition value '2026-13-45' .* is not a valid date")


def test_malformed_csv_fails_fast(spark, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("key,name,amount,day\n1,a,1.50,2026-01-01\nx,b,2.00,2026-01-02\n")
    plan = make_plan(tmp_path, source=Source(format="csv", path=path.as_uri()), columns=COLUMNS, dist_cols=["key"])
    _fails(spark, plan, r"failed")


def test_refuses_a_target_holding_foreign_files(spark, tmp_path):
    src = write_parquet(tmp_path / "src", source_table(100))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    victim = Path(fs.local_path(plan.buckets[3].replicas[1].path))
    victim.mkdir(parents=True)
    (victim / "part-00000-live_00003.c000.snappy.parquet").write_bytes(b"live data")
    with pytest.raises(ColocateError, match="did not produce"):
        run_plan(spark, plan)
    assert (victim / "part-00000-live_00003.c000.snappy.parquet").read_bytes() == b"live data"
    assert not fs.exists(plan.report_uri)


def test_empty_source_and_unpartitioned_table(spark, tmp_path):
    columns = [["key", "bigint"], ["name", "string"], ["amount", "decimal(12,2)"], ["day", "date"]]
    src = write_parquet(tmp_path / "empty", source_table(0))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=columns, dist_cols=["key"],
                     partition_cols=[], value="all", bucket_num=4, table="empty")
    report = run_write(spark, plan)
    assert report.source_rows == 0 and all(r.rows == 0 and r.files == [] for r in report.replicas)
    assert len(report.replicas) == 8

    src = write_parquet(tmp_path / "some", source_table(200))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=columns, dist_cols=["key"],
                     partition_cols=[], value="all", bucket_num=4, table="flat")
    report = run_write(spark, plan)
    register_tables(spark, [read_table(plan, "flat", reports=report)])
    assert_same_rows(spark, spark.table("flat"), spark.read.parquet(src))


def test_a_rerun_of_the_same_plan_replaces_its_own_files(spark, tmp_path):
    src = write_parquet(tmp_path / "src", source_table(300))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"], bucket_num=4)
    first = run_write(spark, plan)
    # leftovers of a crashed attempt of this job: a second file and a temporary copy
    target = Path(fs.local_path(plan.buckets[1].replicas[0].path))
    leftover = target / layout.bucket_file_name(plan.job_id, 1, ".c001.snappy.parquet")
    leftover.write_bytes(b"stale")
    (target / (first.replicas[2].files[0] + ".tmp-abc")).write_bytes(b"half")
    second = run_write(spark, plan)
    assert [(r.path, r.files, r.rows) for r in second.replicas] == [(r.path, r.files, r.rows) for r in first.replicas]
    assert sorted(os.listdir(target)) == first.replicas[2].files


def test_each_bucket_file_is_sorted_by_the_bucket_key(spark, tmp_path):
    """A source in descending key order comes out sorted inside every bucket file, so a join's
    sort finds its runs already in order (Spark's TimSort: about linear)."""
    import pyarrow.parquet as pq

    table = source_table(3000)
    src = write_parquet(tmp_path / "src", table.take(list(reversed(range(table.num_rows)))))
    plan = make_plan(tmp_path, source=Source(format="parquet", path=src), columns=COLUMNS, dist_cols=["key"])
    report = run_plan(spark, plan)
    assert sum(r.rows for r in report.replicas) == 2 * 3000
    for r in report.replicas:
        for name in r.files:
            keys = pq.read_table(fs.local_path(fs.join(r.path, name)), columns=["key"]).column("key").to_pylist()
            assert keys == sorted(keys) and len(keys) == r.rows, r.path
