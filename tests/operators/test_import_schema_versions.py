"""``colocate import`` of a dataset whose partitions were written under different schema versions
(issue 28): old folders lack a column the table has since gained and hold an int the table has
widened to bigint; the import merges them as a read across versions does (null for the missing
column, the int read as bigint) and the imported table reads back exactly that. Types no widening
joins are refused in one line naming the column."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.bulk_import import import_in_session
from airflow_colocate.jobs.read import register, unregister

pytestmark = pytest.mark.spark

DAYS = ["2026-10-01", "2026-10-02", "2026-10-03", "2026-10-04"]


def write_day(root: Path, i: int, day: str, *, new: bool, qty_type=None) -> None:
    keys = list(range(i * 1000, i * 1000 + 40))
    cols = {"k": pa.array(keys, pa.int64()),
            "qty": pa.array([k % 50 for k in keys]).cast(qty_type or (pa.int64() if new else pa.int32()))}
    if new:
        cols["tag"] = pa.array([f"t{k % 3}" for k in keys], pa.string())
    (root / f"dt={day}").mkdir(parents=True)
    pq.write_table(pa.table(cols), root / f"dt={day}" / "part-0.parquet")


def test_import_merges_partitions_of_different_schema_versions(colocate_env, spark, tmp_path):
    cat = colocate_env
    cat.tables.create("t", [("k", "bigint"), ("qty", "int"), ("dt", "date")], ["k"], bucket_num=4,
                      partition_cols=["dt"], colocate_with="g_t")
    cat.schemas.alter("t", widen=["qty bigint"], add=["tag string"])
    root = tmp_path / "src"
    for i, day in enumerate(DAYS):
        write_day(root, i, day, new=i >= 2)
    result = import_in_session(spark, cat, "t", str(root), work_dir=tmp_path / "runs", echo=lambda _: None)
    assert sorted(result["committed"]) == DAYS, result
    register(spark, {"t": None}, catalog=cat)
    try:
        rows = spark.sql("SELECT k, qty, tag, cast(dt AS string) AS dt FROM t").collect()
        assert dict(spark.table("t").dtypes)["qty"] == "bigint"
    finally:
        unregister(spark, ["t"])
    assert len(rows) == 4 * 40
    for r in rows:
        old = r.dt in DAYS[:2]
        assert r.qty == r.k % 50 and (r.tag is None if old else r.tag == f"t{r.k % 3}")


def test_types_no_widening_joins_are_refused(colocate_env, spark, tmp_path):
    cat = colocate_env
    cat.tables.create("u", [("k", "bigint"), ("qty", "bigint"), ("dt", "date")], ["k"], bucket_num=2,
                      partition_cols=["dt"])
    root = tmp_path / "src"
    write_day(root, 0, DAYS[0], new=False, qty_type=pa.string())
    write_day(root, 1, DAYS[1], new=False, qty_type=pa.float64())
    with pytest.raises(ColocateError, match=r"column 'qty' has types no lossless widening joins") as info:
        import_in_session(spark, cat, "u", str(root), work_dir=tmp_path / "runs", echo=lambda _: None)
    assert "\n" not in str(info.value)
