"""Bulk import (issue 15): a Hive-style dataset of 12 partitions loaded by one Spark job, every
partition committed, verified and equal to its source; a partition whose placement fails is not
committed while the others are; a re-run skips what was imported from the same files; bad input
gets one line; a killed import keeps every committed partition complete and a re-run finishes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.cli import main as colocate
from airflow_colocate.core.errors import InvalidArgument, SchemaMismatch
from airflow_colocate.jobs.bulk_import import commit_partition, finish_import, import_in_session, prepare_import
from airflow_colocate.planner.reads import read_table
from airflow_colocate.spark.import_job import run_import
from airflow_colocate.spark.register import register_tables
from airflow_colocate.storage.replica_dir import replica_checksum
from test_write_operator import COLUMNS, read_back
from test_write_killed import kill_everything

pytestmark = pytest.mark.spark

DAYS = [f"2026-10-{d:02d}" for d in range(1, 13)]


def dataset(root: Path, days=DAYS, rows: int = 150) -> Path:
    """One folder per day, rows with keys unique across days; two files in one folder."""
    for i, day in enumerate(days):
        folder = root / f"dt={day}"
        folder.mkdir(parents=True, exist_ok=True)
        keys = list(range(i * 10_000, i * 10_000 + rows))
        table = pa.table({
            "o_orderkey": pa.array(keys, pa.int64()),
            "o_custkey": pa.array([k % 97 for k in keys], pa.int64()),
            "o_totalprice": pa.array([Decimal(k % 1000) / 4 for k in keys], pa.decimal128(15, 2)),
            "o_orderstatus": pa.array([None if k % 13 == 0 else "OFP"[k % 3] for k in keys], pa.string()),
        })
        if i == 0:
            pq.write_table(table.slice(0, 50), folder / "part-0.parquet")
            pq.write_table(table.slice(50), folder / "part-1.parquet")
        else:
            pq.write_table(table, folder / "part-0.parquet")
    return root


def source_rows(root: Path, day: str) -> list[tuple]:
    t = pq.read_table(root / f"dt={day}", partitioning=None)
    return sorted((tuple(r.values()) for r in t.to_pylist()), key=lambda r: r[0])


def make_table(catalog):
    from airflow_colocate.core.sqltypes import parse_columns

    catalog.tables.create("orders", parse_columns(COLUMNS), ["o_orderkey"], bucket_num=4, replication_num=2,
                         partition_cols=["dt"], colocate_with="g_orders")


def committed(catalog) -> list[str]:
    return [p for p in DAYS if _visible(catalog, p)]


def _visible(catalog, day) -> bool:
    try:
        catalog.reads.replicas("orders", [day])
        return True
    except Exception:
        return False


def assert_complete(catalog, root: Path, day: str) -> None:
    """The visible version holds exactly the source rows, and every replica of a bucket is
    byte-identical (the checksum the catalog recorded)."""
    assert read_back(catalog, day) == source_rows(root, day)
    _, parts = catalog.reads.replicas("orders", [day])
    for bucket in parts[0].buckets:
        assert len(bucket) == 2
        for r in bucket:
            d = Path(r.path.removeprefix("file://"))
            names = sorted(p.name for p in d.iterdir())
            assert [(n, (d / n).stat().st_size) for n in names] == [tuple(f) for f in r.files]
            assert replica_checksum([(n, hashlib.sha256((d / n).read_bytes()).hexdigest()) for n in names]) == r.checksum
        assert len({r.checksum for r in bucket}) == 1


def test_import_12_partitions_one_spark_job_failed_partition_rerun(colocate_env, spark, tmp_path):
    """12 partitions by one Spark job; one of them meets a replica directory holding a file this
    import did not write, so its placement fails: it is not committed (nothing of it is visible),
    the 11 others are, complete and verified. A re-run imports exactly that one and skips the
    others (same files); a changed folder is imported again."""
    catalog = colocate_env
    make_table(catalog)
    root = dataset(tmp_path / "landing")
    lines: list[str] = []
    job = prepare_import(catalog, "orders", str(root), work_dir=tmp_path / "runs", echo=lines.append)
    bad = job.plan.partitions[2]
    target = Path(bad.plan.buckets[1].replicas[1].path.removeprefix("file://"))
    target.mkdir(parents=True)
    (target / "part-00000-intruder_00001.c000.snappy.parquet").write_bytes(b"not ours")
    sc = spark.sparkContext
    sc.setJobGroup("import-test", "import")
    try:
        report = run_import(spark, job.plan, on_partition=lambda r: commit_partition(catalog, job, r, lines.append))
        jobs = len(sc.statusTracker().getJobIdsForGroup("import-test"))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    summary = finish_import(catalog, job, report, echo=lines.append)
    assert jobs <= 3, jobs  # the schema read and one bucketing write: not one job per partition
    assert summary["committed"] == [d for d in DAYS if d != bad.value] and summary["rows"] == 11 * 150
    assert list(summary["failed"]) == [bad.value] and "intruder" in summary["failed"][bad.value]
    assert any(f"NOT committed {bad.value}" in line for line in lines)
    assert any("committed 11 of 12 partitions" in line for line in lines)
    assert not _visible(catalog, bad.value)
    for day in summary["committed"]:
        assert_complete(catalog, root, day)

    again = import_in_session(spark, catalog, "orders", str(root), work_dir=tmp_path / "runs", echo=lambda _: None)
    assert again["committed"] == [bad.value] and sorted(again["skipped"]) == summary["committed"]
    assert_complete(catalog, root, bad.value)
    # a folder whose files changed is imported again, as a new version; the others are skipped
    pq.write_table(pq.read_table(root / f"dt={DAYS[3]}" / "part-0.parquet").slice(0, 20),
                   root / f"dt={DAYS[3]}" / "part-0.parquet")
    third = import_in_session(spark, catalog, "orders", str(root), work_dir=tmp_path / "runs", echo=lambda _: None)
    assert third["committed"] == [DAYS[3]] and len(third["skipped"]) == 11
    assert_complete(catalog, root, DAYS[3])
    assert len(read_back(catalog, DAYS[3])) == 20

    # Spark reads every imported partition back as a bucketed table, with the on-read bucket guard
    # (each row's pmod(hash(o_orderkey), 4) is its bucket): the same rows as the source
    view, parts = catalog.reads.replicas("orders", DAYS)
    register_tables(spark, [read_table(view, parts, available={b.id for b in catalog.backends.list()}, name="imported")])
    got = sorted(tuple(r) for r in spark.sql(
        "SELECT o_orderkey, o_custkey, o_totalprice, o_orderstatus, CAST(dt AS STRING) FROM imported").collect())
    assert got == sorted(row + (day,) for day in DAYS for row in source_rows(root, day))


def test_bad_input_is_one_line(colocate_env, spark, tmp_path, capsys):
    catalog = colocate_env
    make_table(catalog)
    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(pa.table({"o_orderkey": [1]}), flat / "part-0.parquet")
    with pytest.raises(InvalidArgument, match=r"holds no dt=<value> folders \(expected .*/dt=<value>/"):
        prepare_import(catalog, "orders", str(flat), echo=lambda _: None)
    (tmp_path / "other" / "day=2026-10-01").mkdir(parents=True)
    with pytest.raises(InvalidArgument, match=r"it has folders of column day; the table's partition column is dt"):
        prepare_import(catalog, "orders", str(tmp_path / "other"), echo=lambda _: None)
    bad = dataset(tmp_path / "badday", ["2026-10-01", "2026-13-45"], rows=5)
    with pytest.raises(InvalidArgument, match=r"folder .*dt=2026-13-45: invalid partition value '2026-13-45'"):
        prepare_import(catalog, "orders", str(bad), echo=lambda _: None)
    # the same through the CLI: one line on stderr, exit 2, before any Spark job
    assert colocate(["import", "orders", str(flat)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no dt=<value> folders" in err[0]

    # a schema that does not fit the table: one line naming the column; nothing committed
    wrong = tmp_path / "wrong" / "dt=2026-10-01"
    wrong.mkdir(parents=True)
    pq.write_table(pa.table({"o_orderkey": pa.array([1.5]), "o_custkey": pa.array([1], pa.int64()),
                             "o_totalprice": pa.array([Decimal(1)], pa.decimal128(15, 2)),
                             "o_orderstatus": ["F"]}), wrong / "part-0.parquet")
    with pytest.raises(SchemaMismatch, match=r"column 'o_orderkey': source type double cannot be written to table type bigint"):
        import_in_session(spark, catalog, "orders", str(tmp_path / "wrong"), work_dir=tmp_path / "runs",
                          echo=lambda _: None)
    assert not _visible(catalog, "2026-10-01")


def test_killed_import_keeps_committed_partitions_and_rerun_finishes(colocate_env, spark, tmp_path):
    """``colocate import`` in its own process, SIGKILLed (with its Spark workers) once some
    partitions are committed: those are complete, the others are not visible; a re-run imports
    exactly the rest."""
    catalog = colocate_env
    make_table(catalog)
    # 72 small partitions: the import commits them in batches of a tenth (or a second's worth),
    # so there are enough batches left when the test sees the first one and freezes the job
    from datetime import date, timedelta

    days = [(date(2026, 7, 1) + timedelta(days=i)).isoformat() for i in range(72)]
    root = dataset(tmp_path / "landing", days, rows=20)
    env = dict(os.environ, SPARK_MASTER="local[1]", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "colocate"), "import", "orders", str(root)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            done = [d for d in days[:8] if _visible(catalog, d)]
            if done:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        kill_everything(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    have = [d for d in days if _visible(catalog, d)]
    assert have and len(have) < len(days), len(have)
    for day in have:
        assert read_back(catalog, day) == source_rows(root, day)  # complete: never a partial partition

    summary = import_in_session(spark, catalog, "orders", str(root), work_dir=tmp_path / "runs", echo=lambda _: None)
    assert sorted(summary["skipped"]) == sorted(have)
    assert sorted(summary["committed"]) == sorted(set(days) - set(have))
    for day in days[::7]:
        assert read_back(catalog, day) == source_rows(root, day)


def test_the_import_operator_publishes_its_table_as_an_iceberg_table(colocate_env, spark, tmp_path):
    """``iceberg=True`` on the import task: a re-run that finds every folder imported already still
    publishes the table (nothing commits, so it publishes it itself), and the next import that
    commits is followed by the Iceberg table. spark-submit (the outer edge) is this test's session."""
    from airflow_colocate.jobs.iceberg import iceberg_catalog
    from airflow_colocate.operators.bulk_import import ColocateImportOperator

    class InSession(ColocateImportOperator):
        def run_job(self, context, plan, on_failure=None):
            return run_import(spark, plan)

    catalog = colocate_env
    make_table(catalog)
    days = DAYS[:3]
    root = dataset(tmp_path / "landing", days, rows=40)
    import_in_session(spark, catalog, "orders", str(root), work_dir=tmp_path / "runs", echo=lambda _: None)
    op = InSession(task_id="imp", table="orders", source=str(root),
                   iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri())
    assert sorted(op.execute(context={})["skipped"]) == days

    def theirs() -> list[tuple]:
        t = iceberg_catalog(catalog).load_table(("default", "orders")).scan().to_arrow()
        return sorted((r["o_orderkey"], str(r["dt"])) for r in t.to_pylist())

    assert theirs() == sorted((r[0], d) for d in days for r in source_rows(root, d))
    pq.write_table(pq.read_table(root / f"dt={days[1]}" / "part-0.parquet").slice(0, 10), root / f"dt={days[1]}" / "part-0.parquet")
    assert op.execute(context={})["committed"] == [days[1]]
    assert theirs() == sorted((r[0], d) for d in days for r in source_rows(root, d)) and len(theirs()) == 90
    with pytest.raises(InvalidArgument, match="goes with iceberg=True"):  # refused when the DAG is parsed
        ColocateImportOperator(task_id="bad", table="orders", source=str(root), iceberg_warehouse="file:///wh")
