"""``colocate table alter`` schema changes and retention, and ``colocate partition``: each refusal
is one line on stderr, exit 2, with the catalog unchanged."""

from __future__ import annotations

import json

import pytest
from test_cli import cli, make_tables  # noqa: F401  (the fixture)

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReplicaReport, Source, WriteReport
from airflow_colocate.planner.write import write_plan


def write(cat: Catalog, table: str, value: str) -> None:
    """A committed write without Spark: the report a write job would send (as tests/catalog/test_incremental.py)."""
    ticket = cat.writes.begin(table, value)
    plan = write_plan(ticket, Source(format="parquet", path="file:///nowhere"), "file:///nowhere/runs")
    cat.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                          ticket.missing, {})
    replicas = [ReplicaReport(b.bucket_seq, r.backend_id, r.path, ["f"], 1, 100, f"c{b.bucket_seq}")
                for b in plan.buckets for r in b.replicas]
    cat.writes.commit(ticket.job_id, WriteReport(plan.job_id, plan.table, value, ticket.version, 0, replicas, 0.0, "t"))


def state():
    cat = Catalog(None, actor="pytest")
    try:
        return [(t.columns, t.schema_version, t.retention_days) for t in cat.tables.list()], len(cat.events(limit=10000))
    finally:
        cat.dispose()


def test_alter_columns_and_retention(cli):  # noqa: F811
    make_tables(cli)
    code, out, err = cli("table", "alter", "orders", "--add-column", "o_comment string", "--add-column", "o_flag boolean")
    assert code == 0, err
    assert "schema v2" in out and "o_flag boolean" in out
    code, out, err = cli("table", "alter", "orders", "--widen-column", "o_totalprice decimal(18,2)", "--retention-days", "3")
    assert code == 0 and "schema v3" in out and "retention 3 days" in out, err
    code, out, err = cli("table", "alter", "orders", "--drop-column", "o_flag")
    assert code == 0 and "schema v4" in out
    shown = json.loads(cli("table", "show", "orders", "--json")[1])["table"]
    assert shown["schema_version"] == 4 and shown["retention_days"] == 3
    assert cli("table", "alter", "orders", "--retention-days", "0")[1].rstrip().endswith("retention none")


@pytest.mark.parametrize("argv, words", [
    (["--drop-column", "o_orderkey"], "distribution column"),
    (["--widen-column", "o_orderdate timestamp_ntz"], "partition column"),
    (["--widen-column", "o_totalprice decimal(10,2)"], "narrowing"),
    (["--add-column", "o_totalprice double"], "the column exists"),
    (["--drop-column", "o_totalprice"], "last data column"),
    (["--retention-days", "-1"], "invalid retention"),
])
def test_refusals(cli, argv, words):  # noqa: F811
    make_tables(cli)
    before = state()
    code, out, err = cli("table", "alter", "orders", *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and out == ""
    assert state() == before


def test_partition_commands(cli):  # noqa: F811
    make_tables(cli)
    cat = Catalog(None, actor="pytest")
    for day in ("2026-11-01", "2026-11-02"):
        write(cat, "orders", day)
    cat.dispose()
    code, out, _ = cli("partition", "list", "orders", "--json")
    assert code == 0 and [r["Partition"] for r in json.loads(out)] == ["2026-11-01", "2026-11-02"]
    assert all(list(r) == ["Partition", "BucketsNum", "ReplicationNum", "VisibleVersion"] and r["VisibleVersion"] == 1
               and isinstance(r["BucketsNum"], int) for r in json.loads(out))
    code, out, err = cli("partition", "drop", "orders", "2026-11-01")
    assert code == 0 and "colocate partition recover orders 2026-11-01" in out, err
    rows = json.loads(cli("partition", "list", "orders", "--dropped", "--json")[1])
    assert [(r["Partition"], r["DroppedVersion"]) for r in rows] == [("2026-11-01", 1)] and isinstance(rows[0]["DroppedAt"], str)
    before = state()
    code, _, err = cli("partition", "drop", "orders", "2026-11-01")
    assert code == 2 and "already in the recycle bin" in err and state() == before
    assert cli("partition", "recover", "orders", "2026-11-01")[0] == 0
    assert len(json.loads(cli("partition", "list", "orders", "--json")[1])) == 2
    code, out, err = cli("partition", "drop", "orders", "2026-11-02", "--force")
    assert code == 0 and "purged" in out
    assert json.loads(cli("partition", "purge", "--window-hours", "0", "--json")[1]) == []
    write(cat := Catalog(None, actor="pytest"), "orders", "2026-11-03")
    cat.dispose()
    assert cli("partition", "drop", "orders", "2026-11-03")[0] == 0
    assert json.loads(cli("partition", "purge", "--window-hours", "0", "--json")[1]) == [
        {"Table": "default.orders", "Partition": "2026-11-03", "Version": 1}]
    assert cli("table", "alter", "orders", "--retention-days", "1")[0] == 0
    rows = json.loads(cli("partition", "expire", "--today", "2026-11-05", "--json")[1])
    assert rows == [{"Table": "default.orders", "Partition": "2026-11-01", "RetentionDays": 1}]
    code, _, err = cli("partition", "expire", "--today", "yesterday")
    assert code == 2 and "invalid --today" in err
