"""``colocate import``: load many partitions of a Hive-style dataset (``dt=…`` folders) into a table
with one Spark job; each partition is committed as soon as it is placed and verified."""

from __future__ import annotations

import contextlib
import sys

import click

from airflow_colocate.cli import output, params
from airflow_colocate.cli.base import Command, Env, pass_env
from airflow_colocate.cli.output import Report, Table, json_option


@click.command("import", cls=Command, help=(
    "Bulk-load a Hive-style partitioned dataset (SOURCE/<partition column>=<value>/*.parquet) into TABLE with one "
    "Spark job: bucket, place and replicate every partition, then commit each partition's version. A partition "
    "already imported from the same files is skipped, so a re-run after a failure finishes the rest."))
@click.argument("table")
@click.argument("source", type=params.URI)
@click.option("--format", "fmt", type=click.Choice(["parquet", "orc"]), default="parquet", show_default=True,
              help="File format of the dataset.")
@click.option("--partitions", help="Only these partition values, comma separated (default: every folder).")
@click.option("--master", type=params.MASTER, help="Spark master for the import job (default $SPARK_MASTER or local[*]).")
@json_option
@pass_env
def import_(env: Env, table: str, source: str, fmt: str, partitions: str | None, master: str | None) -> Report:
    from airflow_colocate.jobs.import_checks import check_import

    catalog = env.catalog()
    t = catalog.tables.get(table, db=env.db)
    wanted = params.names(partitions) or None
    check_import(t, source, fmt, wanted)  # partitions and columns: refused before Spark starts or anything changes
    out = _run(catalog, t.qualified_name, source, fmt, wanted, master)
    head = (f"imported {len(out['committed'])} of {out['partitions']} partitions into {out['table']} "
            f"({len(out['skipped'])} skipped: already imported from the same files; {len(out['failed'])} NOT "
            f"committed): {out['rows']} rows, {out['bytes']} bytes in {out['seconds']:.1f}s")
    blocks: list = [head]
    if out["failed"]:
        blocks.append(Table(["Partition", "Reason"], [[v, r] for v, r in out["failed"].items()],
                            title="NOT committed (the previous version stays visible; re-run to retry)"))
    return Report(blocks, data=out)


def _run(catalog, table: str, source: str, fmt: str, partitions: list[str] | None, master: str | None) -> dict:
    """Import in a Spark session; stop it only if this command started it. Under ``--json`` the
    progress lines go to stderr, so stdout holds the one JSON document."""
    from pyspark.sql import SparkSession

    from airflow_colocate.jobs.bulk_import import import_in_session
    from airflow_colocate.spark.session import get_spark

    owned = SparkSession.getActiveSession() is None
    spark = get_spark("colocate-import", master=master, conf={"spark.ui.enabled": "false",
                                                              "spark.ui.showConsoleProgress": "false"})
    quiet = contextlib.redirect_stdout(sys.stderr) if output.wants_json() else contextlib.nullcontext()
    try:
        if owned:
            spark.sparkContext.setLogLevel("ERROR")
        with quiet:
            return import_in_session(spark, catalog, table, source, fmt=fmt, partitions=partitions,
                                     echo=output.progress())
    finally:
        if owned:
            spark.stop()
