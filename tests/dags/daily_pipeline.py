"""What the tests of the daily TPC-H DAG share: where its output lives and what it must equal."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

DAGS = Path(__file__).resolve().parents[2] / "dags"


def load_dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}, bag.import_errors
    return bag.get_dag(dag_id)


def partition_rows(catalog, table: str, value: str) -> list[dict]:
    """Every row of one committed partition, read file by file from the first replica of each bucket."""
    _, parts = catalog.reads.replicas(table, [value])
    rows = []
    for bucket in parts[0].buckets:
        for f in Path(bucket[0].path.removeprefix("file://")).glob("*.parquet"):
            rows += pq.read_table(f).to_pylist()
    return rows


def check_day(catalog, spark, landing: Path, ds: str) -> None:
    """The day's partitions hold the landed rows once, and revenue_by_priority equals a plain Spark
    computation over the landed files."""
    for table in ("orders", "lineitem"):
        landed = sum(pq.read_metadata(f).num_rows for f in (landing / table).glob("*.parquet"))
        assert sum(1 for p in catalog.partitions.list(table, empty=True) if p.value == ds) == 1
        assert len(partition_rows(catalog, table, ds)) == landed > 0
    spark.read.parquet(str(landing / "orders")).createOrReplaceTempView("ref_o")
    spark.read.parquet(str(landing / "lineitem")).createOrReplaceTempView("ref_l")
    expected = sorted(
        (r["o_orderpriority"], r["order_count"], r["late_lines"], r["revenue"])
        for r in spark.sql(
            "SELECT o_orderpriority, count(DISTINCT o_orderkey) AS order_count, "
            "sum(CASE WHEN l_commitdate < l_receiptdate THEN 1 ELSE 0 END) AS late_lines, "
            "sum(l_extendedprice * (1 - l_discount)) AS revenue "
            "FROM ref_o JOIN ref_l ON o_orderkey = l_orderkey GROUP BY o_orderpriority").collect())
    got = sorted((r["o_orderpriority"], r["order_count"], r["late_lines"], r["revenue"])
                 for r in partition_rows(catalog, "revenue_by_priority", ds))
    assert got == expected  # as lists: a duplicated result row would show


def task_xcom(run, task_id: str, key: str = "return_value"):
    """What a task of a finished ``dag.test()`` run pushed to XCom, read from Airflow's database."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key=key)).first()
        assert row is not None, f"{task_id} pushed no XCom {key!r}"
        return XComModel.deserialize_value(row)
