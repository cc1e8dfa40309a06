"""TPC-H-shaped tables (tpchgen-cli, scale 0.01) loaded into one colocation group, two dates."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.jobs.write import write_in_session
from colocate_testing import add_local_backends

DATES = ["2026-11-01", "2026-11-02"]
ORDERS = ["o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate", "o_orderpriority"]
LINEITEM = ["l_orderkey", "l_linenumber", "l_quantity", "l_extendedprice", "l_shipdate", "l_commitdate",
            "l_receiptdate", "l_shipmode"]


def _tpch(out: Path) -> Path:
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    subprocess.run([exe, "parquet", "-s", "0.01", "--tables=orders,lineitem,customer", f"--output-dir={out}"],
                   check=True, capture_output=True)
    return out


def _by_day(table: pa.Table, key: str, columns: list[str], out: Path) -> dict[str, Path]:
    """Split by key parity into two 'days'; an order and its lines land on the same day."""
    paths = {}
    for i, day in enumerate(DATES):
        part = table.filter(pc.equal(pc.bit_wise_and(table[key], 1), i)).select(columns)
        part = part.append_column("dt", pa.array([day] * part.num_rows, pa.string()).cast(pa.date32()))
        d = out / day
        d.mkdir(parents=True)
        pq.write_table(part, d / "data.parquet")
        paths[day] = d
    return paths


def _plain(table: pa.Table) -> pa.Table:
    """tpchgen's string_view columns as plain strings (pyarrow's take has no string_view kernel)."""
    return table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type)
                                 for f in table.schema]))


@pytest.fixture(scope="session")
def tpch_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpch")
    raw = _tpch(root / "raw")
    orders = _plain(pq.read_table(raw / "orders.parquet"))
    lineitem = _plain(pq.read_table(raw / "lineitem.parquet"))
    notes = orders.select(["o_orderkey", "o_comment"]).rename_columns(["n_orderkey", "n_comment"])
    flags = orders.filter(pc.equal(pc.bit_wise_and(orders["o_orderkey"], 4), 0)).select(["o_orderkey", "o_orderstatus"])
    flags = flags.rename_columns(["f_orderkey", "f_flag"])
    return {
        "orders": _by_day(orders, "o_orderkey", ORDERS, root / "orders"),
        "lineitem": _by_day(lineitem, "l_orderkey", LINEITEM, root / "lineitem"),
        "notes": _by_day(notes, "n_orderkey", ["n_orderkey", "n_comment"], root / "notes"),
        "flags": _by_day(flags, "f_orderkey", ["f_orderkey", "f_flag"], root / "flags"),
        "customer": raw / "customer.parquet",
    }


@pytest.fixture(scope="module")
def tpch_catalog(spark, tpch_sources, tmp_path_factory):
    """orders, lineitem and notes in group g_tpch (8 buckets, 2 replicas); flags and customer plain."""
    root = tmp_path_factory.mktemp("lake")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends")
    schema = {
        "orders": ("o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice decimal(15,2), "
                   "o_orderdate date, o_orderpriority string, dt date", ["o_orderkey"], "g_tpch"),
        "lineitem": ("l_orderkey bigint, l_linenumber int, l_quantity decimal(15,2), l_extendedprice decimal(15,2), "
                     "l_shipdate date, l_commitdate date, l_receiptdate date, l_shipmode string, dt date",
                     ["l_orderkey"], "g_tpch"),
        "notes": ("n_orderkey bigint, n_comment string, dt date", ["n_orderkey"], "g_tpch"),
        "flags": ("f_orderkey bigint, f_flag string, dt date", ["f_orderkey"], None),
    }
    from airflow_colocate.core.sqltypes import parse_columns

    for name, (cols, dist, group) in schema.items():
        cat.tables.create(name, parse_columns(cols), dist, bucket_num=8, replication_num=2, partition_cols=["dt"],
                         colocate_with=group)
        for day in DATES:
            write_in_session(spark, cat, name, day, Source(format="parquet", path=str(tpch_sources[name][day])),
                             work_dir=root / "runs")
    cat.tables.create("customer", parse_columns("c_custkey bigint, c_name string, c_mktsegment string"), ["c_custkey"],
                     bucket_num=4, replication_num=1)
    src = root / "customer_src"
    src.mkdir()
    pq.write_table(pq.read_table(tpch_sources["customer"], columns=["c_custkey", "c_name", "c_mktsegment"]), src / "c.parquet")
    write_in_session(spark, cat, "customer", "all", Source(format="parquet", path=str(src)), work_dir=root / "runs")
    yield cat
    cat.dispose()


@pytest.fixture
def plain(spark, tpch_sources):
    """The same data as plain Spark views over the source files: the reference answer."""
    for name in ("orders", "lineitem", "notes", "flags"):
        spark.read.parquet(*[str(p) for p in tpch_sources[name].values()]).createOrReplaceTempView(f"ref_{name}")
    spark.read.parquet(str(tpch_sources["customer"])).createOrReplaceTempView("ref_customer")
    return spark


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """One real Spark Connect server for the run, started on first use (~20 s) and stopped at the
    end: the pyspark package's SparkConnectServer with this project's jar and the settings
    get_spark gives a session (in-memory catalog, bucketing), on a free loopback port."""
    from sparkconnect import start_connect_server

    from airflow_colocate.spark.locality import locality_conf

    conf = {"spark.sql.catalogImplementation": "in-memory", "spark.sql.sources.bucketing.enabled": "true",
            "spark.sql.requireAllClusterKeysForCoPartition": "false", "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2", "spark.driver.memory": "1g",
            "spark.sql.autoBroadcastJoinThreshold": "-1",  # as the classic test session: exact Exchange counts
            **locality_conf()}
    server = start_connect_server(tmp_path_factory.mktemp("connect"), conf)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def connect_spark(connect_server):
    """A Spark Connect client session (``sc://127.0.0.1:<port>``), a fresh server-side session each test."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(connect_server.url).create()
    yield session
    session.stop()
