"""Issue 16 (9): OpenLineage facets of the write and join operators (operators/lineage.py), from the
summaries a real write and join return. Airflow's OpenLineage provider is optional: without it the
operators answer None; with it (``pip install 'airflow-colocate[openlineage]'``) they name inputs,
outputs and row counts."""

from __future__ import annotations

import importlib.util

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.contract import Source
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.operators.join import ColocateJoinOperator
from airflow_colocate.operators.lineage import join_lineage, path_dataset, table_dataset, write_lineage
from airflow_colocate.operators.write import ColocateWriteOperator

HAVE_PROVIDER = importlib.util.find_spec("airflow.providers.openlineage") is not None


def test_dataset_names_follow_openlineage_conventions():
    assert table_dataset("orders") == ("colocate://default", "orders")
    assert table_dataset("sales.orders") == ("colocate://sales", "orders")
    assert path_dataset("/data/in") == ("file", "/data/in")
    assert path_dataset("file:///data/in") == ("file", "/data/in")
    assert path_dataset("s3a://bucket/landing/orders") == ("s3a://bucket", "landing/orders")


@pytest.fixture
def committed(sqlite_catalog, spark, tmp_path):
    """A real write (rows, bytes, replicas from the catalog) and a real join into a catalog table."""
    cat = sqlite_catalog
    from colocate_testing import add_local_backends

    add_local_backends(cat, tmp_path / "backends")
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"id": pa.array(range(300), pa.int64())}), src / "p.parquet")
    cat.tables.create("events", parse_columns("id bigint"), ["id"], bucket_num=2, replication_num=2)
    write = write_in_session(spark, cat, "events", "all", Source(format="parquet", path=str(src)), work_dir=tmp_path / "runs")
    cat.tables.create("sales.counts", parse_columns("k bigint, n bigint"), ["k"], bucket_num=2)
    join = join_in_session(spark, cat, "SELECT a.id % 3 AS k, count(*) AS n FROM events a JOIN events b ON a.id = b.id "
                           "GROUP BY a.id % 3",
                           {"events": None}, output_table="sales.counts", work_dir=tmp_path / "runs")
    return str(src), write, join


@pytest.mark.spark
@pytest.mark.skipif(HAVE_PROVIDER, reason="the OpenLineage provider is installed")
def test_without_the_provider_the_operators_answer_none(committed):
    source, write, join = committed
    assert write_lineage(write, source=source) is None and join_lineage(join, tables=["events"]) is None
    op = ColocateWriteOperator(task_id="w", table="events", source=source)
    assert op.get_openlineage_facets_on_complete(None) is None
    assert ColocateJoinOperator(task_id="j", query="q", tables={"events": None}).get_openlineage_facets_on_complete(None) is None


@pytest.mark.spark
@pytest.mark.skipif(not HAVE_PROVIDER, reason="apache-airflow-providers-openlineage is not installed")
def test_with_the_provider_inputs_outputs_and_row_counts(committed):
    source, write, join = committed
    lineage = write_lineage(write, source=source)
    (inp,), (out,) = lineage.inputs, lineage.outputs
    assert (inp.namespace, inp.name, inp.inputFacets["inputStatistics"].rowCount) == ("file", source, 300)
    stats = out.outputFacets["outputStatistics"]
    assert (out.namespace, out.name) == ("colocate://default", "events")
    assert (stats.rowCount, stats.size, stats.fileCount) == (300, write["bytes"], 4) and stats.size > 0

    lineage = join_lineage(join, tables=["events"])
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("colocate://default", "events")]
    (out,) = lineage.outputs
    assert (out.namespace, out.name, out.outputFacets["outputStatistics"].rowCount) == ("colocate://sales", "counts", 3)
    # the same facets the operators hand Airflow's OpenLineage listener once they ran
    op = ColocateJoinOperator(task_id="j", query="q", tables={"events": None}, output_table="sales.counts")
    assert op.get_openlineage_facets_on_complete(None) is None  # not run: nothing to report
    op._finished = (join, ["events"])
    assert op.get_openlineage_facets_on_complete(None).outputs[0].name == "counts"
