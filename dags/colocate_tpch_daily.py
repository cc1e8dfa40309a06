"""Daily TPC-H pipeline on a colocation group.

Each logical date loads one day's slice of ``orders`` and ``lineitem`` (a tpchgen-cli part) into
group ``g_tpch`` bucketed by order key, waits until the group is stable, then runs the revenue per
order priority (TPC-H Q4/Q12 shape) as a colocated join into ``revenue_by_priority``. Every task
overwrites its own date's partition, so a re-run or a backfill leaves each partition once.

Copy this file into your dags folder; set COLOCATE_LANDING for where raw files land.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_colocate.core.paths import colocate_home
from airflow_colocate.hooks.catalog import ColocateCatalogHook
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.write import ColocateWriteOperator
from airflow_colocate.sensors.stable import GroupStableSensor
from airflow_colocate.core.sqltypes import parse_columns

GROUP = "g_tpch"
BUCKETS = 8
REPLICAS = 2
START = pendulum.datetime(2026, 11, 1, tz="UTC")
LANDING = os.environ.get("COLOCATE_LANDING") or str(colocate_home() / "landing")
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"}

ORDERS = ("o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice decimal(15,2), "
          "o_orderdate date, o_orderpriority string, o_clerk string, o_shippriority int, o_comment string, dt date")
LINEITEM = ("l_orderkey bigint, l_partkey bigint, l_suppkey bigint, l_linenumber int, l_quantity decimal(15,2), "
            "l_extendedprice decimal(15,2), l_discount decimal(15,2), l_tax decimal(15,2), l_returnflag string, "
            "l_linestatus string, l_shipdate date, l_commitdate date, l_receiptdate date, l_shipinstruct string, "
            "l_shipmode string, l_comment string, dt date")
RESULT = "o_orderpriority string, order_count bigint, late_lines bigint, revenue decimal(38,4), dt date"

REVENUE_SQL = """
SELECT o.o_orderpriority,
       count(DISTINCT o.o_orderkey)                                   AS order_count,
       sum(CASE WHEN l.l_commitdate < l.l_receiptdate THEN 1 ELSE 0 END) AS late_lines,
       sum(l.l_extendedprice * (1 - l.l_discount))                   AS revenue,
       o.dt
FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey
WHERE o.dt = DATE'{{ ds }}'
GROUP BY o.o_orderpriority, o.dt
"""


def day_part(ds: str, parts: int) -> int:
    """Which tpchgen part is this date's slice: days since START, wrapped over ``parts``."""
    days = (pendulum.parse(ds) - START).in_days()
    return days % parts + 1


with DAG(
    dag_id="colocate_tpch_daily",
    description="Load a day of TPC-H orders and lineitem into one colocation group and join them without shuffle",
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["colocate", "example"],
    params={
        "scale": Param(0.01, type="number", minimum=0.001, description="TPC-H scale factor of the whole data set"),
        "parts": Param(30, type="integer", minimum=1, description="days the data set is split into"),
    },
    doc_md=__doc__,
) as dag:

    @task
    def land(ds: str | None = None, params: dict | None = None) -> dict:
        """Generate this date's slice of orders and lineitem with tpchgen-cli (a stand-in for an
        upstream export), replacing anything a previous try left."""
        out = Path(LANDING) / ds
        shutil.rmtree(out, ignore_errors=True)
        exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
        part = day_part(ds, int(params["parts"]))
        subprocess.run([exe, "parquet", "-s", str(params["scale"]), "--tables=orders,lineitem",
                        f"--parts={params['parts']}", f"--part={part}", f"--output-dir={out}"], check=True)
        return {"orders": str(out / "orders"), "lineitem": str(out / "lineitem"), "part": part}

    @task
    def create_result_table() -> str:
        catalog = ColocateCatalogHook().get_conn()
        t = catalog.tables.create("revenue_by_priority", parse_columns(RESULT), ["o_orderpriority"], bucket_num=2,
                                 replication_num=1, partition_cols=["dt"], if_not_exists=True)
        return t.qualified_name

    landed = land()
    load_orders = ColocateWriteOperator(
        task_id="load_orders", table="orders", source="{{ ti.xcom_pull(task_ids='land')['orders'] }}",
        partition="{{ ds }}", columns=ORDERS, dist_cols=["o_orderkey"], bucket_num=BUCKETS,
        replication_num=REPLICAS, partition_col="dt", colocate_with=GROUP, conf=SPARK_CONF)
    load_lineitem = ColocateWriteOperator(
        task_id="load_lineitem", table="lineitem", source="{{ ti.xcom_pull(task_ids='land')['lineitem'] }}",
        partition="{{ ds }}", columns=LINEITEM, dist_cols=["l_orderkey"], bucket_num=BUCKETS,
        replication_num=REPLICAS, partition_col="dt", colocate_with=GROUP, conf=SPARK_CONF)
    wait_stable = GroupStableSensor(task_id="wait_group_stable", group=GROUP, poke_interval=10, timeout=3600,
                                    mode="reschedule")
    revenue = ColocateJoinOperator(
        task_id="revenue_by_priority", query=REVENUE_SQL,
        tables={"orders": ["{{ ds }}"], "lineitem": ["{{ ds }}"]},
        output_table="revenue_by_priority", output_partition="{{ ds }}", conf=SPARK_CONF)

    landed >> [load_orders, load_lineitem] >> wait_stable >> revenue
    create_result_table() >> revenue
