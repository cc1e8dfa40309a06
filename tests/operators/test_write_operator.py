"""ColocateWriteOperator end to end: real spark-submit on local[2], real catalog, real files."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import ColocateError, SchemaMismatch
from airflow_colocate.jobs.write import ensure_table, write_in_session
from airflow_colocate.operators.write import ColocateWriteOperator

pytestmark = pytest.mark.spark

COLUMNS = "o_orderkey bigint, o_custkey bigint, o_totalprice decimal(15,2), o_orderstatus string, dt date"


def make_source(path: Path, n: int, start: int = 0) -> Path:
    keys = list(range(start, start + n))
    table = pa.table({
        "o_orderkey": pa.array(keys, pa.int64()),
        "o_custkey": pa.array([k % 97 for k in keys], pa.int64()),
        "o_totalprice": pa.array([Decimal(k % 1000) / 4 for k in keys], pa.decimal128(15, 2)),
        "o_orderstatus": pa.array([None if k % 13 == 0 else "OFP"[k % 3] for k in keys], pa.string()),
    })
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "part-0.parquet")
    return path


def write_op(source: Path, partition: str, mode: str = "overwrite", **kw) -> ColocateWriteOperator:
    return ColocateWriteOperator(
        task_id="load_orders", table="orders", source=str(source), partition=partition, mode=mode,
        columns=COLUMNS, dist_cols=["o_orderkey"], bucket_num=4, replication_num=2, partition_col="dt",
        colocate_with="g_orders", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}, **kw)


def read_back(catalog, partition: str) -> list[tuple]:
    """Rows of the visible version, read from each bucket's first replica with pyarrow."""
    _, parts = catalog.reads.replicas("orders", [partition])
    rows = []
    for bucket in parts[0].buckets:
        directory = Path(bucket[0].path.removeprefix("file://"))
        for f in sorted(directory.glob("*.parquet")):
            rows += [tuple(r.values()) for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: r[0])


def sha(directory: str) -> dict[str, str]:
    d = Path(directory.removeprefix("file://"))
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir())}


def test_write_overwrite_append_and_replicas(colocate_env, spark, tmp_path):
    catalog = colocate_env
    src = make_source(tmp_path / "src1", 3000)
    result = write_op(src, "2026-11-01").execute(context={})
    assert result["rows"] == 3000 and result["version"] == 1 and result["replicas"] == 8
    group = catalog.groups.get("g_orders")
    _, parts = catalog.reads.replicas("orders", ["2026-11-01"])
    for seq, replicas in enumerate(parts[0].buckets):
        assert sorted(r.backend_id for r in replicas) == sorted(group.bucket_map[seq])
        assert len({r.checksum for r in replicas}) == 1
        assert sha(replicas[0].path) == sha(replicas[1].path)  # byte-identical copies on both backends
    expected = sorted(pq.read_table(src).to_pylist(), key=lambda r: r["o_orderkey"])
    assert read_back(catalog, "2026-11-01") == [tuple(r.values()) for r in expected]

    # a re-run for the same date (a backfill) replaces the partition: the same rows once, not twice.
    # The same plan/commit path as the operator, minus spark-submit start-up (kept for one run above).
    again = write_in_session(spark, catalog, "orders", "2026-11-01", Source(format="parquet", path=str(src)),
                             work_dir=tmp_path / "runs")
    assert again["version"] == 2
    assert len(read_back(catalog, "2026-11-01")) == 3000

    # append adds to the visible version
    more = make_source(tmp_path / "src2", 500, start=10_000)
    result = write_in_session(spark, catalog, "orders", "2026-11-01", Source(format="parquet", path=str(more)),
                              mode="append", work_dir=tmp_path / "runs")
    assert result["version"] == 3
    rows = read_back(catalog, "2026-11-01")
    assert len(rows) == 3500 and rows[-1][0] == 10_499


def test_bad_inputs_commit_nothing(colocate_env, spark, tmp_path):
    catalog = colocate_env
    src = make_source(tmp_path / "src", 200)
    ensure_table(catalog, "orders", write_op(src, "2026-11-01").table_spec())
    write_in_session(spark, catalog, "orders", "2026-11-01", Source(format="parquet", path=str(src)),
                     work_dir=tmp_path / "runs")
    before = read_back(catalog, "2026-11-01")

    with pytest.raises(ColocateError, match="invalid partition value"):
        write_op(src, "../2026").execute(context={})
    with pytest.raises(ColocateError, match="does not exist"):
        write_op(tmp_path / "missing", "2026-11-01").execute(context={})
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    pq.write_table(pa.table({"o_orderkey": pa.array(["x"]), "o_custkey": pa.array([1])}), wrong / "p.parquet")
    with pytest.raises(ColocateError, match="o_orderkey"):
        write_op(wrong, "2026-11-01").execute(context={})
    no_key = tmp_path / "no_key"
    no_key.mkdir()
    pq.write_table(pq.read_table(src).drop(["o_orderkey"]), no_key / "p.parquet")
    with pytest.raises(ColocateError, match="o_orderkey"):  # the distribution column is missing
        write_op(no_key, "2026-11-01").execute(context={})
    tables, events = [t.name for t in catalog.tables.list()], len(catalog.events(limit=10_000))
    with pytest.raises(SchemaMismatch, match="bucket"):  # a new table that does not fit the group's schema
        ColocateWriteOperator(task_id="load_o2", table="o2", source=str(src), partition="2026-11-01",
                              columns=COLUMNS, dist_cols=["o_orderkey"], bucket_num=8, replication_num=2,
                              partition_col="dt", colocate_with="g_orders").execute(context={})
    assert [t.name for t in catalog.tables.list()] == tables and len(catalog.events(limit=10_000)) == events
    for backend in catalog.backends.list()[1:]:
        catalog.backends.set_state(backend.name, "down")
    with pytest.raises(ColocateError, match="needs 2 alive backends"):
        write_op(src, "2026-11-01").execute(context={})
    assert catalog.partitions.list("orders", empty=True)[0].visible_version == 1
    assert read_back(catalog, "2026-11-01") == before
