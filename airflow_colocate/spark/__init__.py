"""The Spark side (data plane): session helpers, the write job, table registration for bucketed
reads, and the replica copy job. Nothing here touches the catalog: jobs get a JSON plan and write a
JSON report."""
