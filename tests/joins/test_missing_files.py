"""Issue 18: a missing or short file never reads as "no rows".

One replica file is removed and another truncated: the next join reads the buckets' other
replicas and returns every row; both replicas end up ``bad`` in the catalog with their reasons and
the group unstable; a balance repairs them and the group is stable again. When no exact replica of
a bucket is left, the read fails with one line naming the bucket instead of returning fewer rows.
Real Spark writes and reads, real files, a real balance (the clone job's task, in process).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from colocate_testing import add_local_backends

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.read import read_plans, register
from airflow_colocate.jobs.runners import local_runner
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark.register import UnreadableBuckets

pytestmark = pytest.mark.spark

DAY = "2026-11-01"
COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]
JOIN = "SELECT o.id, o.v, l.v AS lv FROM orders o JOIN lines l ON o.dt = l.dt AND o.id = l.id"
TABLES = {"orders": None, "lines": None}


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


@pytest.fixture
def lake(spark, tmp_path):
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    rows = {"orders": [(k, f"o{k}") for k in range(2000)], "lines": [(k, f"l{k}") for k in range(0, 4000, 2)]}
    for table, data in rows.items():
        cat.tables.create(table, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"],
                         colocate_with="g")
        src = tmp_path / "src" / table
        src.mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array([k for k, _ in data], pa.int64()), "v": [v for _, v in data]}),
                       src / "data.parquet")
        write_in_session(spark, cat, table, DAY, Source(format="parquet", path=str(src)), work_dir=tmp_path / "runs")
    yield cat, rows, tmp_path
    cat.dispose()


def read_back(spark, cat) -> dict[str, list[tuple]]:
    register(spark, TABLES, catalog=cat)
    return {t: sorted((r["id"], r["v"]) for r in spark.sql(f"SELECT id, v FROM {t}").collect()) for t in TABLES}


def joined(rows) -> list[tuple]:
    lines = dict(rows["lines"])
    return sorted((k, v, lines[k]) for k, v in rows["orders"] if k in lines)


def first_choice(cat, table: str, bucket: int):
    """The replica a read of ``table`` registers first for ``bucket``, and the others."""
    (t,) = [t for t in read_plans(cat, TABLES).tables if t.name == table]
    return t.partitions[0].candidates[bucket]


def replica_states(cat, paths) -> dict[str, str]:
    from sqlalchemy import select

    from airflow_colocate.catalog import models as m

    with cat.engine.connect() as c:
        return dict(c.execute(select(m.Replica.path, m.Replica.state).where(m.Replica.path.in_(list(paths)))).all())


def test_removed_and_truncated_files_read_from_the_other_replica_then_balance_repairs(spark, lake):
    cat, rows, tmp = lake
    assert read_back(spark, cat) == rows
    removed, *others_a = first_choice(cat, "orders", 1)
    truncated, *others_b = first_choice(cat, "lines", 2)
    gone = _local(removed.path) / removed.files[0][0]
    gone.unlink()
    short = _local(truncated.path) / truncated.files[0][0]
    with open(short, "r+b") as f:
        f.truncate(truncated.files[0][1] // 2)

    out = tmp / "out"
    summary = join_in_session(spark, cat, JOIN, TABLES, output_path=str(out))
    got = sorted((r["id"], r["v"], r["lv"]) for r in spark.read.parquet(str(out)).collect())
    assert summary["rows"] == len(joined(rows)) and got == joined(rows)  # every row, from the other replicas
    reasons = {b["path"]: b["reason"] for b in summary["bad_replicas"]}
    assert reasons == {removed.path: f"missing file {removed.files[0][0]}",
                       truncated.path: f"file {truncated.files[0][0]} holds {truncated.files[0][1] // 2} bytes, "
                                       f"the catalog recorded {truncated.files[0][1]}"}
    assert replica_states(cat, reasons) == {removed.path: "bad", truncated.path: "bad"}
    events = {e.subject: e.detail["reason"] for e in cat.events(kind="replica.bad")}
    assert "missing file" in events[removed.path] and "holds" in events[truncated.path]
    g = cat.groups.get("g")
    assert not g.stable and "does not hold the files the catalog recorded" in g.unstable_reason
    # a bad replica is never chosen again, and reads stay whole
    assert first_choice(cat, "orders", 1)[0].path == others_a[0].path
    assert read_back(spark, cat) == rows

    summary = Balancer(cat, local_runner(), BalanceOptions(grace=timedelta(0)), work_dir=tmp / "runs").run()
    assert [j.state for j in summary["jobs"]] == ["done"]
    assert cat.health.check_group("g").stable and cat.groups.get("g").stable
    assert replica_states(cat, reasons) == {removed.path: "verified", truncated.path: "verified"}
    assert gone.exists() and short.stat().st_size == truncated.files[0][1]
    assert read_back(spark, cat) == rows


def test_no_exact_replica_left_fails_clearly_never_fewer_rows(spark, lake):
    cat, rows, tmp = lake
    replicas = first_choice(cat, "orders", 3)
    for r in replicas:
        (_local(r.path) / r.files[0][0]).unlink()
    with pytest.raises(UnreadableBuckets) as err:
        register(spark, TABLES, catalog=cat)
    message = str(err.value)
    assert "\n" not in message and message.startswith("cannot read default.orders partition 2026-11-01 bucket 3: ")
    for r in replicas:
        assert f"backend {r.backend_id} ({r.path}): missing file {r.files[0][0]}" in message
    assert set(replica_states(cat, [r.path for r in replicas]).values()) == {"bad"}
    assert not cat.groups.get("g").stable

    # the join job (through the control plane) refuses too, and writes nothing
    out = tmp / "out"
    with pytest.raises(ColocateError, match="bucket 3 has no verified replica|cannot read default.orders"):
        join_in_session(spark, cat, JOIN, TABLES, output_path=str(out))
    assert not out.exists()
    # balance cannot invent the lost bucket: it says so, and the read keeps failing
    summary = Balancer(cat, local_runner(), BalanceOptions(grace=timedelta(0)), work_dir=tmp / "runs").run()
    assert not cat.health.check_group("g").stable
    with pytest.raises(ColocateError):
        read_back(spark, cat)
    assert summary is not None and os.path.exists(tmp / "catalog.db")
