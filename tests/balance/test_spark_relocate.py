"""End to end with Spark writes and Spark joins: a colocated join falls back while a backend is
lost, the group is relocated, and the same join is colocated again with the same rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from balance_lake import assert_whole, fingerprint, rows

from airflow_colocate.core.contract import Source
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.write import write_in_session

pytestmark = pytest.mark.spark

QUERY = ("SELECT o.dt, o.o_id, o.amount, l.qty FROM orders o JOIN lines l "
         "ON o.dt = l.dt AND o.o_id = l.l_id")


def test_relocation_brings_the_colocated_join_back(spark_lake, tmp_path):
    lake = spark_lake  # relocated by the Spark clone job
    cat, spark = lake.catalog, lake.spark
    src = tmp_path / "src"
    for name, cols, data in [
        ("orders", "o_id bigint, amount double, dt date", {"o_id": list(range(2000)), "amount": [i * 1.5 for i in range(2000)]}),
        ("lines", "l_id bigint, qty bigint, dt date", {"l_id": [i // 3 for i in range(4500)], "qty": [i % 7 for i in range(4500)]}),
    ]:
        cat.tables.create(name, parse_columns(cols), [cols.split()[0]], bucket_num=6, replication_num=2,
                         partition_cols=["dt"], colocate_with="g")
        (src / name).mkdir(parents=True)
        pq.write_table(pa.table(data), src / name / "p.parquet")
        write_in_session(spark, cat, name, "2026-11-01", Source(format="parquet", path=str(src / name)), work_dir=lake.work)
    tables = {"orders": ["2026-11-01"], "lines": ["2026-11-01"]}
    first = join_in_session(spark, cat, QUERY, tables, work_dir=lake.work)
    assert first["colocate"] and first["rows"] == 4500
    expected = sorted(map(tuple, spark.sql(QUERY).collect()))
    sums = fingerprint(cat)
    before = {t: rows(cat, t) for t in ("orders", "lines")}

    lake.add_backend("be4")
    cat.backends.set_state("be3", "down", reason="host lost")
    lost = join_in_session(spark, cat, QUERY, tables, work_dir=lake.work)
    assert not lost["colocate"] and "group is not stable" in lost["explain"]
    assert lost["rows"] == 4500  # slower, never wrong

    lake.clock.advance(minutes=45)
    summary = lake.run()
    assert [j.kind for j in summary["jobs"]] == ["relocate"] and summary["groups"][0]["stable"]
    assert_whole(cat)
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before
    again = join_in_session(spark, cat, QUERY, tables, work_dir=lake.work)
    assert again["colocate"] and "colocate: true" in again["explain"]
    assert sorted(map(tuple, spark.sql(QUERY).collect())) == expected
