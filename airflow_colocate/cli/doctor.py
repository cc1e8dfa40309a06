"""``colocate doctor``: what a deployment needs to know, in one place, as ``airflow info`` and
``dbt debug`` do.

An installed package fails in ways a checkout never shows: a wheel without its jar runs with local
reads and the ordered bucket read silently off, a catalog URL comes from an environment variable
nobody remembers setting, a cluster's executors run another Python or cannot import the package.
The checks are :mod:`airflow_colocate.jobs.doctor`'s; here the catalog's URL is resolved as every
command resolves it, and the facts are printed, with one stderr line per problem (exit 1; exit 0
when there is none).
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from airflow_colocate.cli import output, params
from airflow_colocate.cli.base import Command, Env, pass_env
from airflow_colocate.cli.output import Bullets, Fields, Report, Table, json_option

PROBE_TIMEOUT = 10.0  # seconds for all backends together: a hung mount must not hang the doctor
EXIT_PROBLEMS = 1


@click.command("doctor", cls=Command, help=(
    "Check this installation: package, catalog (URL, where it came from, schema), PySpark, Java, the locality "
    "jar, every backend (reachable, identity marker) and, with --master, what a Spark executor sees. "
    "Exit 0 when all is well, else 1 with one line per problem on stderr."))
@click.option("--master", type=params.MASTER, help="Also run a tiny Spark job on this master and report what its executors see "
                               "(Python, pyarrow, whether they import this package).")
@click.option("--spark-version", "spark_version", metavar="VERSION",
              help="The Spark version of --master's cluster (as a Spark connection's spark_version extra); "
                   "default: what spark-submit --version on PATH prints.")
@click.option("--conn", "conn_id", metavar="CONN_ID",
              help="Read the catalog URL from this Airflow connection, as a task would (default: --catalog, "
                   "$COLOCATE_CATALOG_URL, the embedded catalog).")
@click.option("--timeout", type=params.SECONDS, default=PROBE_TIMEOUT, show_default=True,
              help="Seconds to wait for the backend probes.")
@json_option
@pass_env
def doctor(env: Env, master: str | None, spark_version: str | None, conn_id: str | None, timeout: float) -> Report:
    from airflow_colocate.jobs.doctor import examine

    def open_catalog(url: str):
        env.catalog_url = url  # env.close() disposes of what is opened here
        return env.catalog(check_schema=False)

    facts = examine(lambda: catalog_url_and_source(env, conn_id), open_catalog, master=master,
                    spark_version=spark_version, timeout=timeout)
    problems = facts["problems"]
    report = Report(_blocks(facts), data=facts)
    if problems:
        output.render(report, as_json=output.wants_json())
        for problem in problems:
            click.echo(f"colocate doctor: {problem}", err=True)
        raise click.exceptions.Exit(EXIT_PROBLEMS)
    return report


CATALOG_SOURCES = ("flag", "connection", "env", "default")  # the order the CLI looks in


def catalog_url_and_source(env: Env, conn_id: str | None) -> tuple[str, str, str]:
    """The URL this command would open, where it came from (one of :data:`CATALOG_SOURCES`) and
    that place in words."""
    from airflow_colocate.catalog.engine import default_url

    if env.catalog_url:
        return env.catalog_url, "flag", "--catalog"
    if conn_id:
        from airflow_colocate.hooks.catalog import ColocateCatalogHook

        hook = ColocateCatalogHook(conn_id)
        with contextlib.redirect_stdout(sys.stderr):  # Airflow's log lines: stdout holds the report alone
            url = hook.catalog_url()
        if hook.source.startswith("connection"):
            return url, "connection", f"Airflow connection {conn_id}"
        # no such connection: the hook fell back as a task would; say to what
        kind = "env" if hook.source == "COLOCATE_CATALOG_URL" else "default"
        return url, kind, f"{hook.source} (no Airflow connection {conn_id})"
    if os.environ.get("COLOCATE_CATALOG_URL"):
        return default_url(), "env", "$COLOCATE_CATALOG_URL"
    return default_url(), "default", "the embedded SQLite catalog under $COLOCATE_HOME"


def _blocks(facts: dict) -> list:
    pkg, cat, jar, java, spark = facts["package"], facts["catalog"], facts["jar"], facts["java"], facts["pyspark"]
    install = "editable checkout" if pkg["editable"] else "installed"
    blocks: list = [Fields("airflow-colocate", [
        ("version", f"{pkg['version']} ({install})"),
        ("location", pkg["location"]),
        ("python", f"{facts['python']['version']} ({facts['python']['executable']})"),
        ("pyspark", spark["version"] or "not installed"),
        ("java", f"{java['version'] or 'not found'} ({java['path'] or 'no java'})"),
        ("locality jar", f"{jar['path']} (from {jar['origin']})" if jar["found"] else "not found"),
        ("catalog", cat["url"] or "none"),
        ("catalog from", cat["source_detail"] or "?"),
        ("schema", f"{cat['schema'] or 'none'} (code: {cat['code_schema']})"),
    ])]
    if facts["backends"]:
        blocks.append(Table(["BackendId", "Name", "Host", "Root", "State", "Reachable", "Marker", "Error"],
                            [[b["id"], b["name"], b["host"], b["root"], b["state"], str(b["reachable"]).lower(),
                              (b["marker"] or {}).get("name") or "", b["error"] or ""] for b in facts["backends"]]))
    stores = facts.get("object_stores")
    if stores is not None:
        blocks.append(Fields("S3 backends", [
            ("endpoint", stores["endpoint"]), ("credentials from", stores["credentials"]),
            ("hadoop-aws", ", ".join(stores["hadoop_aws"]) or "not here"),
            ("server-side copy", "yes (boto3)" if stores["server_side_copy"] else "no (boto3 missing)")]))
    if facts.get("iceberg"):
        blocks.append(Table(["Table", "IcebergWarehouse", "Snapshot", "Lags"], [
            [p["table"], p["warehouse"], p["snapshot_id"] or "", str(p["lags"]).lower()] for p in facts["iceberg"]]))
    line = facts.get("line")
    if line is not None:
        blocks.append(Fields("Spark line of --master", [
            ("line", f"Spark {line['line']} (Scala {line['scala']})"),
            ("jar", line["jar"] or "none for this line"),
            ("runs without", ", ".join(line["without"]) + f" ({line['why']})" if line["without"] else "nothing"),
        ]))
    executor = facts["executor"]
    if executor is not None:
        blocks.append(Table(["Host", "Python", "Pyarrow", "ImportsPackage", "PackageLocation"],
                            [[s["host"], s["python"], s["pyarrow"] or "", str(s["imports_package"]).lower(),
                              s["package_location"] or s["error"] or ""] for s in executor["executors"]],
                            title=f"executors of {executor['master']}"))
    problems = facts["problems"]
    blocks.append(Bullets(problems, heading=f"{len(problems)} problem(s):") if problems else "no problems found")
    return blocks
