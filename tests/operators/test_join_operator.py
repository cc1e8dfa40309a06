"""ColocateJoinOperator through spark-submit: explain and report in XCom, output committed."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.operators.join import ColocateJoinOperator

pytestmark = pytest.mark.spark
CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}


@pytest.fixture
def loaded(colocate_env, spark, tmp_path):
    cat = colocate_env
    cat.tables.create("orders", parse_columns("o_orderkey bigint, o_priority string, dt date"), ["o_orderkey"],
                     bucket_num=4, replication_num=2, partition_cols=["dt"], colocate_with="g")
    cat.tables.create("lineitem", parse_columns("l_orderkey bigint, l_price bigint, dt date"), ["l_orderkey"],
                     bucket_num=4, replication_num=2, partition_cols=["dt"], colocate_with="g")
    o, li = tmp_path / "o", tmp_path / "l"
    o.mkdir(), li.mkdir()
    pq.write_table(pa.table({"o_orderkey": pa.array(range(100), pa.int64()),
                             "o_priority": [f"{k % 3}-PRIO" for k in range(100)]}), o / "p.parquet")
    pq.write_table(pa.table({"l_orderkey": pa.array([k // 3 for k in range(300)], pa.int64()),
                             "l_price": pa.array(range(300), pa.int64())}), li / "p.parquet")
    write_in_session(spark, cat, "orders", "2026-11-01", Source(format="parquet", path=str(o)), work_dir=tmp_path / "runs")
    write_in_session(spark, cat, "lineitem", "2026-11-01", Source(format="parquet", path=str(li)), work_dir=tmp_path / "runs")
    return cat


JAVA_FRAME = re.compile(r"\bat [\w$.]+\([\w$.]*(:\d+)?\)|\w+(\.\w+)+(Exception|Error)\b")


def test_sql_join_into_a_catalog_table_and_structured_join(loaded, tmp_path, capfd):
    """Issue 47 also: the join task's log (the operator's lines and spark-submit's, as in a task's
    Log tab) holds no Java stack trace (six FileStreamSink traces for the registration's empty
    table LOCATION made ~600 of 700 lines) and is under 120 lines."""
    cat = loaded
    capfd.readouterr()
    cat.tables.create("revenue", parse_columns("o_priority string, revenue bigint"), ["o_priority"], bucket_num=2)
    op = ColocateJoinOperator(
        task_id="revenue", conf=CONF, require_colocate=True,
        query=("SELECT o.o_priority, sum(l.l_price) AS revenue FROM orders o JOIN lineitem l "
               "ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.o_priority"),
        tables={"orders": ["2026-11-01"], "lineitem": ["2026-11-01"]}, output_table="revenue",
        iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri())  # the output published as an Iceberg table too
    result = op.execute(context={})
    out, err = capfd.readouterr()
    log = (out + err).splitlines()
    assert not [line for line in log if JAVA_FRAME.search(line)], "\n".join(log)
    assert 10 < len(log) < 120, "\n".join(log)
    assert not [line for line in log if "Context impl" in line], "\n".join(log)  # Alembic's, on opening the catalog
    assert result["colocate"] is True and "colocate: true" in result["explain"]
    assert result["joins"][0]["exchanges_left"] == 0 and result["joins"][0]["exchanges_right"] == 0
    assert result["output"]["rows"] == 3 and result["output"]["version"] == 1
    expected = {f"{p}-PRIO": sum(i for i in range(300) if (i // 3) % 3 == p) for p in range(3)}
    _, parts = cat.reads.replicas("revenue")
    got = {}
    for bucket in parts[0].buckets:
        for f in Path(bucket[0].path.removeprefix("file://")).glob("*.parquet"):
            got.update({r["o_priority"]: r["revenue"] for r in pq.read_table(f).to_pylist()})
    assert got == expected
    from airflow_colocate.jobs.iceberg import iceberg_catalog

    published = iceberg_catalog(cat).load_table(("default", "revenue")).scan().to_arrow().to_pylist()
    assert {r["o_priority"]: r["revenue"] for r in published} == expected and len(published) == 3
    with pytest.raises(InvalidArgument, match="give output_table too"):  # refused when the DAG is parsed
        ColocateJoinOperator(task_id="bad", query="SELECT 1", tables={"orders": None}, iceberg=True)

    out = tmp_path / "joined"
    op = ColocateJoinOperator(task_id="structured", conf=CONF, join_tables=["orders", "lineitem"],
                              on=[[["o_orderkey", "l_orderkey"]]], how="left", columns=["o_orderkey", "l_price"],
                              partitions=["2026-11-01"], output_path=out.as_uri(), disable_colocate_join=True)
    result = op.execute(context={})
    assert result["rows"] == 300 and result["colocate"] is False
    assert result["joins"][0]["reason"] == "colocate join is disabled"
