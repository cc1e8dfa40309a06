"""Demo step: the daily revenue join over the demo catalog, printing the explain Spark produced."""

from __future__ import annotations

import sys

from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs import join_in_session
from airflow_colocate.spark.session import get_spark

QUERY = ("SELECT o.o_orderpriority, count(*) AS lines, sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue "
         "FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.o_orderpriority "
         "ORDER BY o.o_orderpriority")

if __name__ == "__main__":
    dates = sys.argv[1:]
    spark = get_spark("colocate-demo-join", conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        result = join_in_session(spark, Catalog(), QUERY, {"orders": dates, "lineitem": dates})
        print(f"$ SELECT ... FROM orders JOIN lineitem ON (dt, orderkey) over {', '.join(dates)}")
        for line in result["explain"].splitlines():
            print(f"  {line}")
        print(f"  {result['rows']} result rows")
    finally:
        spark.stop()
