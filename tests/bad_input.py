"""What the bad-input tests (issue 48) share: a small lake run through ``colocate``'s ``main`` in
process, a snapshot of everything a command could change (every catalog table's rows, every file
and folder under the backend roots with its bytes' hash), and a guard that fails loudly if a JVM
would start."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import MetaData, create_engine, select

from airflow_colocate.cli import main


class JvmStarted(AssertionError):
    """Raised where Spark would start a JVM: the test's own failure, never a refusal (exit 1)."""


def block_jvm(monkeypatch, refuse) -> None:
    """Every way this package starts a JVM calls ``refuse`` instead: its session builder, and
    PySpark's gateway launch under both names it is known by (a ``SparkContext`` calls the one
    ``pyspark.core.context`` imported)."""
    import pyspark.core.context
    import pyspark.java_gateway

    from airflow_colocate.spark import session

    monkeypatch.setattr(session, "get_spark", refuse)
    monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", refuse)
    monkeypatch.setattr(pyspark.core.context, "launch_gateway", refuse)


@pytest.fixture
def no_jvm(monkeypatch):
    """A JVM start fails the test (exit 1, never a refusal); the list of attempts tells a test
    whether one was tried."""
    tried: list[str] = []

    def refuse(*args, **kwargs):
        tried.append(repr(args[:1]))
        raise JvmStarted("a JVM was about to start")

    block_jvm(monkeypatch, refuse)
    return tried


class Lake:
    """A catalog under ``home`` with three backends under ``roots``, tables ``orders`` (group g1,
    partitioned by day, replication 2), ``lineitem`` (g1) and ``solo`` (no group, replication 1),
    and an import source ``src`` whose files do not fit ``orders``."""

    def __init__(self, tmp_path: Path, capsys):
        self.home, self.roots, self.src = tmp_path / "home", tmp_path / "roots", tmp_path / "src"
        self.capsys = capsys
        self._meta: MetaData | None = None
        self._engine = None

    def run(self, *argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def ok(self, *argv: str) -> str:
        code, out, err = self.run(*argv)
        assert code == 0, (argv, err)
        return out

    def build(self) -> Lake:
        self.ok("init")
        for i in (1, 2, 3):
            (self.roots / f"be{i}").mkdir(parents=True)
            self.ok("backend", "add", (self.roots / f"be{i}").as_uri(), "--name", f"be{i}", "--capacity", "10G")
        self.ok("table", "create", "orders", "--columns", "o_orderkey bigint, o_orderdate date, o_totalprice double",
                "--distributed-by", "o_orderkey", "--buckets", "4", "--replication", "2",
                "--partition-by", "o_orderdate", "--colocate-with", "g1")
        self.ok("table", "create", "lineitem", "--columns", "l_orderkey bigint, l_qty int",
                "--distributed-by", "l_orderkey", "--buckets", "4", "--replication", "2", "--colocate-with", "g1")
        self.ok("table", "create", "solo", "--columns", "k bigint, dt date, v int", "--distributed-by", "k",
                "--buckets", "2", "--partition-by", "dt")
        self.ok("partition", "add", "orders", "2026-11-01")
        self.source("o_orderdate=2026-11-01", {"o_orderkey": pa.array([1, 2], pa.int64()),
                                               "o_totalprice": pa.array(["a", "b"])})  # a string price
        return self

    def source(self, folder: str, columns: dict, root: Path | None = None) -> Path:
        where = (root or self.src) / folder
        where.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), where / "part-0.parquet")
        return root or self.src

    def snapshot(self) -> tuple[dict, dict]:
        """Every catalog table's rows (reflected from the SQLite file) and every path under the
        backend roots: a file with its bytes' hash, a folder as such."""
        if self._meta is None:
            self._engine = create_engine(f"sqlite:///{self.home / 'catalog.db'}")
            self._meta = MetaData()
            self._meta.reflect(self._engine)
        with self._engine.connect() as c:
            rows = {t.name: sorted(repr(tuple(r)) for r in c.execute(select(t))) for t in self._meta.sorted_tables}
        files = {str(p.relative_to(self.roots)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
                 for p in sorted(self.roots.rglob("*"))}
        return rows, files

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


@pytest.fixture
def lake(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    for name in ("COLOCATE_CATALOG_URL", "COLOCATE_ACTOR", "COLOCATE_RELOCATE_DELAY_MINUTES"):
        monkeypatch.delenv(name, raising=False)
    built = Lake(tmp_path, capsys).build()
    yield built
    built.close()


def assert_refused(lake: Lake, argv: list[str], words: str = "") -> str:
    """``argv`` exits 2 with one stderr line (holding ``words``), and nothing changed."""
    before = lake.snapshot()
    code, out, err = lake.run(*argv)
    assert code == 2, (argv, code, err[-2000:])
    assert err.count("\n") == 1 and err.startswith("colocate: error: "), (argv, err[-2000:])
    assert words in err, (argv, err)
    assert lake.snapshot() == before, argv
    return err
