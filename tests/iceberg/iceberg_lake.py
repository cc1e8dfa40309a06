"""A lake whose tables are published as Iceberg tables, and the two reads the tests compare: ours
(the Spark read every user of the package makes) and an Iceberg reader's (pyiceberg, scan to Arrow).

The writes follow the write job's contract with pyarrow (tests/balance/balance_lake.py, held to
the real write job by test_lake_writer_matches_spark.py); ``columns`` says which extra columns the
next files carry, as a source with a column added after the table was created does."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "balance"))

from balance_lake import Clock, Lake  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.jobs import iceberg as publication  # noqa: E402
from airflow_colocate.jobs.read import query  # noqa: E402


class IcebergLake(Lake):
    extra: dict  # column -> (arrow type, value of a key)
    without: set  # columns the files no longer carry (dropped from the table)

    def put(self, data: pa.Table, uri: str) -> None:
        ids = data.column("id").to_pylist()
        for name, (kind, value) in getattr(self, "extra", {}).items():
            data = data.append_column(name, pa.array([value(k) for k in ids], kind))
        for name in getattr(self, "without", set()):
            data = data.drop_columns([name])
        super().put(data, uri)


def make_lake(url: str, root: Path) -> IcebergLake:
    clock = Clock()
    cat = Catalog(url, actor="pytest", clock=clock)
    cat.init()
    lake = IcebergLake(cat, clock, root)
    lake.extra, lake.without = {}, set()
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    return lake


def normal(rows) -> list[tuple]:
    return sorted(tuple(sorted(r.items())) for r in rows)


def rows(days: dict[str, range], qty=None) -> list[tuple]:
    """The rows the lake's writes hold, normalised: ``days`` partition -> keys; ``qty``: the added column's value of a key (None: no column)."""
    out = []
    for d, keys in days.items():
        for k in keys:
            row = {"id": k, "v": f"orders-{d}-{k}", "dt": date.fromisoformat(d)}
            if qty is not None:
                row["qty"] = qty(d, k)
            out.append(row)
    return normal(out)


def ours(spark, lake: Lake, table: str = "orders") -> list[tuple]:
    """Our read's rows: every committed partition, through the package's Spark read."""
    _, parts = lake.catalog.reads.replicas(table)
    if not parts:
        return []
    return normal(r.asDict() for r in query(spark, f"SELECT * FROM {table}", {f"default.{table}": None},
                                             catalog=lake.catalog, replace_views=True))


def iceberg_table(lake: Lake, table: str = "orders"):
    return publication.iceberg_catalog(lake.catalog).load_table(("default", table))


def theirs(lake: Lake, table: str = "orders", snapshot_id: int | None = None) -> list[tuple]:
    """An Iceberg reader's rows: pyiceberg's scan of the table's current (or given) snapshot."""
    return normal(iceberg_table(lake, table).scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


def named_files(lake: Lake, table: str = "orders") -> dict[int, set[str]]:
    """snapshot id -> the data files it names, for every snapshot the table retains."""
    from airflow_colocate.iceberg.publisher import current_files

    tbl = iceberg_table(lake, table)
    out = {}
    for snap in tbl.metadata.snapshots:
        out[snap.snapshot_id] = {e.data_file.file_path for m in snap.manifests(tbl.io)
                                 for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)}
    assert not tbl.current_snapshot() or set(current_files(tbl)) == out[tbl.current_snapshot().snapshot_id]
    return out


def spark_reader(*metadata: str):
    """Start Spark 4.1 with Iceberg's runtime (bench/iceberg_way.py's pinned jar) in a process of
    its own, the line's own Python, reading the table states ``metadata`` (Iceberg metadata files:
    those snapshots, whatever is committed later), and any state handed to the returned reader's
    ``read`` later; ``rows()`` waits for them all (one list for one state, a list of them for
    several). Started early so its one JVM comes up while the test goes on."""
    import os
    import subprocess

    import pytest

    here = Path(__file__).resolve().parent
    repo = here.parent.parent
    sys.path[:0] = [str(here.parent / "spark_lines"), str(repo / "bench"), str(repo / "build_support")]
    from iceberg_way import RUNTIME, runtime_jar
    from line_testing import venv_of
    from s3_jars import fetch

    venv = venv_of("4.1")
    try:
        fetch(*RUNTIME.split(":"))  # what scripts/setup.sh --with-spark-lines fetched (no Maven needed)
        jar = runtime_jar()
    except (OSError, subprocess.CalledProcessError, SystemExit) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Iceberg's Spark runtime cannot be fetched: {exc}")
        pytest.skip(f"Iceberg's Spark runtime cannot be fetched: {exc}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON")}
    proc = subprocess.Popen([str(venv / "bin" / "python"), str(here / "read_with_spark.py"), str(jar), *metadata],
                            stdin=None if metadata else subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    return SparkReader(proc, len(metadata))


class SparkReader:
    def __init__(self, proc, states: int):
        self.proc, self.states = proc, states

    def read(self, metadata: str) -> None:
        self.proc.stdin.write(metadata + "\n")
        self.proc.stdin.flush()
        self.states += 1

    def __call__(self) -> list:
        import json

        out, err = self.proc.communicate(timeout=300)
        lines = [x for x in out.splitlines() if x.startswith("ROWS ")]
        assert self.proc.returncode == 0 and len(lines) == self.states, err[-2000:]
        got = [normal(json.loads(line[5:])) for line in lines]
        return got[0] if len(got) == 1 else got


def as_json(rows: list[tuple]) -> list[tuple]:
    """Our rows as the Spark reader's JSON gives them (dates as ISO text)."""
    return sorted(tuple((k, v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r) for r in rows)
