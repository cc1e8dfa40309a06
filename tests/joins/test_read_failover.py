"""Issue 29: a corrupt replica never fails a query while a good one is left (spark/failover.py).

Four faults, each in the replica the query reads: a flipped byte in a data page (the page CRC), a
truncated file (the listing check) or one cut and padded back to its size (the footer), another
bucket's rows at the recorded size (the guard), and a deleted file (the listing check; and, in a
session that already listed it, Spark's own FileNotFound). A colocated join and a plain registered
read (``jobs.read.query``) return exactly plain Spark's rows over the same source files; the
replica is then ``bad`` with the reason and its group unstable; a real balance (the clone job's
task, in process) repairs it and the group is stable again. Real Spark, real files.
"""

from __future__ import annotations

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
from airflow_colocate.jobs.join import join_in_session, prepare_join
from airflow_colocate.jobs.read import query, read_plans
from airflow_colocate.jobs.runners import local_runner
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark import register as register_mod

pytestmark = pytest.mark.spark

DAY = "2026-11-01"
COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]
SQL = "SELECT o.id, o.v, l.v AS lv FROM {o} o JOIN {l} l ON o.dt = l.dt AND o.id = l.id"
TABLES = {"orders": None, "lines": None}
FAULTS = ["flipped_byte", "truncated", "unreadable_footer", "other_buckets_rows", "deleted"]


@pytest.fixture
def lake(spark, tmp_path):
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    data = {"orders": [(k, f"o{k}") for k in range(2000)], "lines": [(k, f"l{k}") for k in range(0, 4000, 2)]}
    for table, rows in data.items():
        cat.tables.create(table, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"],
                         colocate_with="g")
        src = tmp_path / "src" / table
        src.mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array([k for k, _ in rows], pa.int64()), "v": [v for _, v in rows]}),
                       src / "data.parquet")
        write_in_session(spark, cat, table, DAY, Source(format="parquet", path=str(src)), work_dir=tmp_path / "runs")
        spark.read.parquet(str(src)).createOrReplaceTempView(f"ref_{table}")  # plain Spark: the reference
    assert cat.health.check_group("g").stable
    yield cat, tmp_path
    cat.dispose()


def expected(spark) -> list[tuple]:
    ref = "SELECT o.id, o.v, l.v AS lv FROM ref_orders o JOIN ref_lines l ON o.id = l.id"  # one day: no dt
    return sorted(tuple(r) for r in spark.sql(ref).collect())


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def colocated_choice(cat, tmp, table: str, bucket: int):
    """The replica the colocated join reads first for ``bucket`` of ``table``."""
    plan, _ = prepare_join(cat, SQL.format(o="orders", l="lines"), TABLES, work_dir=tmp / "runs")
    (t,) = [t for t in plan.tables if t.name == table]
    assert t.bucketed
    return t.partitions[0].candidates[bucket][0]


def read_choice(cat, table: str, bucket: int):
    (t,) = [t for t in read_plans(cat, TABLES).tables if t.name == table]
    return t.partitions[0].candidates[bucket][0]


def _data_file(replica) -> Path:
    (name,) = [n for n, _ in replica.files if n.endswith(".parquet")]
    return _local(replica.path) / name


def corrupt(fault: str, replica, donor) -> str:
    """Damage ``replica``'s data file as ``fault`` says; ``donor``: a replica of another bucket of
    the same table. Returns what the recorded reason must contain."""
    f = _data_file(replica)
    data = f.read_bytes()
    if fault == "flipped_byte":
        meta = pq.ParquetFile(f).metadata.row_group(0)
        col = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "v")
        at = col.data_page_offset + col.total_compressed_size // 2
        f.write_bytes(data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1:])
        assert f.stat().st_size == len(data)
        return "CRC checksum verification failed"
    if fault == "truncated":
        f.write_bytes(data[: len(data) // 2])
        return "bytes, the catalog recorded"
    if fault == "unreadable_footer":  # cut, then zero-padded back to the recorded size
        f.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
        return "read failed: "
    if fault == "deleted":
        f.unlink()
        return "missing file part-"
    assert fault == "other_buckets_rows"
    other = pq.read_table(_data_file(donor))
    table = other.slice(0, max(1, other.num_rows // 4))
    tmp = f.with_name("donor.tmp")
    pq.write_table(table, tmp)
    donor_bytes = tmp.read_bytes()
    tmp.unlink()
    footer_len = int.from_bytes(donor_bytes[-8:-4], "little")
    body, footer = donor_bytes[: -8 - footer_len], donor_bytes[-8 - footer_len:]
    pad = len(data) - len(donor_bytes)
    assert pad >= 0, "the donor's rows must fit the recorded size"
    f.write_bytes(body + bytes(pad) + footer)  # offsets in the footer still point at the same pages
    assert f.stat().st_size == len(data) and pq.read_table(f).num_rows == table.num_rows
    return "holds a row of bucket"


def state_of(cat, path: str) -> str:
    from sqlalchemy import select

    from airflow_colocate.catalog import models as m

    with cat.engine.connect() as c:
        return c.execute(select(m.Replica.state).where(m.Replica.path == path)).scalar_one()


def _buckets(replica_lists) -> list[int]:
    return [b for b, c in enumerate(replica_lists) if c and c[0].rows]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_corrupt_replica_is_read_from_another_then_repaired(spark, lake, fault):
    cat, tmp = lake
    want = expected(spark)
    orders = read_plans(cat, TABLES).tables[0]
    b, c = _buckets(orders.partitions[0].candidates)[:2]

    # a colocated join: the replica it reads for orders bucket b is damaged
    victim = colocated_choice(cat, tmp, "orders", b)
    why = corrupt(fault, victim, colocated_choice(cat, tmp, "orders", c))
    summary = join_in_session(spark, cat, SQL.format(o="orders", l="lines"), TABLES, work_dir=tmp / "runs",
                              output_path=str(tmp / "out-join"))
    got = sorted(tuple(r) for r in spark.read.parquet(str(tmp / "out-join")).select("id", "v", "lv").collect())
    assert got == want and summary["rows"] == len(want)
    assert summary["colocate"], summary["explain"]  # the other replica is read bucketed: still no shuffle
    reasons = {x["path"]: x["reason"] for x in summary["bad_replicas"]}
    assert list(reasons) == [victim.path] and why in reasons[victim.path], reasons
    assert summary["marked_bad"] == [victim.path] and state_of(cat, victim.path) == "bad"
    g = cat.groups.get("g")
    assert not g.stable and victim.path in g.unstable_reason and "bucket" in g.unstable_reason

    # a plain registered read (the group is unstable now): lines' first choice for bucket c is damaged
    lines = read_plans(cat, TABLES).tables[1]
    assert not lines.bucketed
    second = read_choice(cat, "lines", c)
    corrupt(fault, second, read_choice(cat, "lines", b))
    rows = query(spark, SQL.format(o="orders", l="lines"), TABLES, catalog=cat)
    assert sorted(tuple(r) for r in rows) == want
    assert state_of(cat, second.path) == "bad"
    events = {e.subject: e.detail["reason"] for e in cat.events(kind="replica.bad")}
    assert why in events[victim.path] and why in events[second.path]

    # balance repairs both from the good copies; the group is stable and reads are whole again
    done = Balancer(cat, local_runner(), BalanceOptions(grace=timedelta(0)), work_dir=tmp / "runs").run()
    assert [j.state for j in done["jobs"]] == ["done"], done
    assert cat.health.check_group("g").stable and cat.groups.get("g").stable
    assert state_of(cat, victim.path) == state_of(cat, second.path) == "verified"
    (good,) = [r for r in orders.partitions[0].candidates[b] if r.path != victim.path]
    assert _data_file(victim).read_bytes() == _data_file(good).read_bytes()  # the good copy's bytes
    again = join_in_session(spark, cat, SQL.format(o="orders", l="lines"), TABLES, work_dir=tmp / "runs")
    assert again["colocate"] and again["bad_replicas"] == [] and again["rows"] == len(want)
    assert sorted(tuple(r) for r in query(spark, SQL.format(o="orders", l="lines"), TABLES, catalog=cat)) == want


def test_a_file_gone_after_spark_listed_it_fails_over(spark, lake, monkeypatch):
    """The session already read the table (Spark cached the directory's listing); the file goes
    after the listing check of the next read: Spark's FileNotFound is a read failure like any."""
    cat, _ = lake
    want = expected(spark)
    sql = SQL.format(o="orders", l="lines")
    assert sorted(tuple(r) for r in query(spark, sql, TABLES, catalog=cat)) == want
    b = _buckets(read_plans(cat, TABLES).tables[0].partitions[0].candidates)[0]
    victim = read_choice(cat, "orders", b)
    original = register_mod.register_tables

    def checked_then_gone(*args, **kwargs):
        out = original(*args, **kwargs)
        _data_file(victim).unlink(missing_ok=True)
        return out

    monkeypatch.setattr(register_mod, "register_tables", checked_then_gone)
    assert sorted(tuple(r) for r in query(spark, sql, TABLES, catalog=cat)) == want
    assert state_of(cat, victim.path) == "bad"
    (reason,) = [e.detail["reason"] for e in cat.events(kind="replica.bad") if e.subject == victim.path]
    assert reason.startswith("read check: read failed: ") and _data_file(victim).name in reason, reason


def test_no_good_replica_left_fails_naming_the_bucket_and_every_replica_tried(spark, lake):
    cat, tmp = lake
    orders = read_plans(cat, TABLES).tables[0]
    b, c = _buckets(orders.partitions[0].candidates)[:2]
    replicas = orders.partitions[0].candidates[b]
    for r in replicas:
        corrupt("flipped_byte", r, None)
    out = tmp / "out"
    with pytest.raises(ColocateError) as err:
        join_in_session(spark, cat, SQL.format(o="orders", l="lines"), TABLES, work_dir=tmp / "runs",
                        output_path=str(out))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"cannot read default.orders partition {DAY} bucket {b}: every replica failed"), message
    for r in replicas:
        assert f"backend {r.backend_id} ({r.path}): read failed: " in message
    assert message.count("CRC checksum verification failed") == len(replicas)
    assert {state_of(cat, r.path) for r in replicas} == {"bad"}
    assert not out.exists() or not list(out.glob("*.parquet"))  # nothing written
