"""Run by the line's own Python (Spark 4.1, Iceberg's runtime on its classpath): for each Iceberg
metadata file (one table state each) given after the jar, then for each line read from stdin until
it closes, print every row as one JSON line, read by Spark's Iceberg reader. Stdin lets one JVM,
started early, read states a test reaches later."""

import json
import sys

from pyspark.sql import SparkSession

jar, states = sys.argv[1], sys.argv[2:]
spark = (SparkSession.builder.master("local[1]").appName("iceberg-read")
         .config("spark.jars", jar).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


def read(metadata: str) -> None:
    rows = spark.read.format("iceberg").load(metadata).collect()
    print("ROWS " + json.dumps([{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.asDict().items()}
                                for r in rows]), flush=True)


for metadata in states:
    read(metadata)
if not states:
    for line in sys.stdin:
        if line.strip():
            read(line.strip())
spark.stop()
