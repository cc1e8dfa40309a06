"""Demo step: the daily revenue join over the demo catalog, printing the explain Spark produced.

    demo_join.py --expect true|false DATE...

``--expect`` makes the step fail (exit 1) when the join did not do what the story says, so a
demo that prints the wrong verdict never ends with "Done"."""

from __future__ import annotations

import sys

from airflow_colocate.catalog import Catalog
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.spark.session import get_spark

QUERY = ("SELECT o.o_orderpriority, count(*) AS lines, sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue "
         "FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.o_orderkey = l.l_orderkey GROUP BY o.o_orderpriority "
         "ORDER BY o.o_orderpriority")

if __name__ == "__main__":
    args = sys.argv[1:]
    expect = None
    if args[:1] == ["--expect"]:
        if len(args) < 2 or args[1] not in ("true", "false"):
            sys.exit("demo_join.py: --expect needs true or false")
        expect, args = args[1] == "true", args[2:]
    dates = args
    spark = get_spark("colocate-demo-join", conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        result = join_in_session(spark, Catalog(), QUERY, {"orders": dates, "lineitem": dates})
        print(f"$ SELECT ... FROM orders JOIN lineitem ON (dt, orderkey) over {', '.join(dates)}")
        for line in result["explain"].splitlines():
            print(f"  {line}")
        print(f"  {result['rows']} result rows")
        if expect is not None and result["colocate"] is not expect:
            print(f"demo: expected colocate: {str(expect).lower()}, the join says otherwise", file=sys.stderr)
            sys.exit(1)
        if result["rows"] == 0:
            print("demo: the join returned no rows", file=sys.stderr)
            sys.exit(1)
    finally:
        spark.stop()
