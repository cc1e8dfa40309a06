"""OpenLineage for the write and join operators, through Airflow's OpenLineage provider.

Airflow's OpenLineage listener asks an operator, once it has run, for
``get_openlineage_facets_on_complete(task_instance)``: the data sets it read and wrote. Ours know
exactly (the catalog table, the partition just committed, its rows and bytes), so they answer from
the summary they return instead of leaving the provider to guess from SQL. The provider
(``apache-airflow-providers-openlineage``) is optional: without it these functions return None and
nothing else changes (``pip install 'airflow-colocate[openlineage]'`` adds it).

Naming follows OpenLineage's conventions: a catalog table is namespace ``colocate://<db>``, name
``<table>`` (the same identity as its Airflow Asset, ``colocate://<db>/<table>``); a file source
is namespace ``file`` with its absolute path, an object store ``<scheme>://<bucket>`` with its key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit


def table_dataset(table: str) -> tuple[str, str]:
    """``orders`` or ``db.orders`` -> (``colocate://db``, ``orders``); the default db is ``default``."""
    db, _, name = table.rpartition(".")
    return f"colocate://{db or 'default'}", name


def path_dataset(path: str) -> tuple[str, str]:
    """``/data/x`` or ``file:///data/x`` -> (``file``, ``/data/x``); ``s3://b/k`` -> (``s3://b``, ``k``)."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return "file", parts.path or path
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")


def _classes():
    """The provider's classes, or None when it is not installed (lineage is optional)."""
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import input_statistics_input_dataset as input_stats
        from openlineage.client.facet_v2 import output_statistics_output_dataset as output_stats
    except ImportError:
        return None
    return (OperatorLineage, InputDataset, OutputDataset, input_stats.InputStatisticsInputDatasetFacet,
            output_stats.OutputStatisticsOutputDatasetFacet)


def _output(classes, write: Mapping):
    _, _, output_dataset, _, out_stats = classes
    namespace, name = table_dataset(write["table"])
    return output_dataset(namespace, name, outputFacets={"outputStatistics": out_stats(
        rowCount=write["rows"], size=write["bytes"], fileCount=write.get("replicas"))})


def write_lineage(summary: Mapping | None, *, source: str | None = None, source_tables: Iterable[str] = ()):
    """A write: its source (a path, with the rows read from it, or the catalog tables of its query)
    in, the committed table out with rows, bytes and replica count. None without the provider or
    before the task committed."""
    classes = _classes()
    if classes is None or not summary:
        return None
    operator_lineage, input_dataset, _, in_stats, _ = classes
    if source:
        inputs = [input_dataset(*path_dataset(source), inputFacets={"inputStatistics": in_stats(rowCount=summary["rows"])})]
    else:
        inputs = [input_dataset(*table_dataset(t)) for t in source_tables]
    return operator_lineage(inputs=inputs, outputs=[_output(classes, summary)])


def join_lineage(summary: Mapping | None, *, tables: Iterable[str], output_path: str | None = None):
    """A join: the catalog tables it read in; its output table (rows, bytes, replicas) or its output
    path (rows) out. None without the provider or before the task finished."""
    classes = _classes()
    if classes is None or not summary:
        return None
    operator_lineage, input_dataset, output_dataset, _, out_stats = classes
    inputs = [input_dataset(*table_dataset(t)) for t in tables]
    if summary.get("output"):
        outputs = [_output(classes, summary["output"])]
    elif output_path:
        outputs = [output_dataset(*path_dataset(output_path),
                                  outputFacets={"outputStatistics": out_stats(rowCount=summary["rows"])})]
    else:
        outputs = []
    return operator_lineage(inputs=inputs, outputs=outputs)


__all__ = ["join_lineage", "path_dataset", "table_dataset", "write_lineage"]
