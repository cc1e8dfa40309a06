"""Run by the line's own Python (Spark 4.1, Iceberg's runtime on its classpath): print every row of
the Iceberg table whose metadata file is argv[2] as one JSON line, read by Spark's Iceberg reader."""

import json
import sys

from pyspark.sql import SparkSession

jar, metadata = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").appName("iceberg-read")
         .config("spark.jars", jar).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = spark.read.format("iceberg").load(metadata).collect()
print("ROWS " + json.dumps([{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.asDict().items()}
                            for r in rows]))
spark.stop()
