"""Issue 30 in the ``colocate`` command: ``group list`` / ``group show`` say since when a group is
unstable, when relocation starts and whether joins shuffle; ``table show`` lists the partitions a
down backend made unavailable; all of it clears when the backend is back."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main
from airflow_colocate.core.contract import ReplicaReport, WriteReport
from colocate_testing import add_local_backends


def commit(cat: Catalog, table: str, partition: str) -> None:
    ticket = cat.writes.begin(table, partition)
    cat.writes.set_targets(ticket.job_id, {seq: [be for be, _ in b] for seq, b in enumerate(ticket.targets)},
                           ticket.missing, {})
    replicas = [ReplicaReport(seq, be, f"{root}/{table}/{partition}/v{ticket.version}/b{seq}", ["part-0.parquet"],
                              10, 1000, f"{seq:064x}") for seq, b in enumerate(ticket.targets) for be, root in b]
    cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), ticket.table.qualified_name, partition,
                                                ticket.version, 10 * len(ticket.targets), replicas, 0.1, "test"))


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.delenv("COLOCATE_RELOCATE_DELAY_MINUTES", raising=False)
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=3)
    cat.tables.create("orders", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=6, replication_num=2,
                      partition_cols=["dt"], colocate_with="g")
    cat.tables.create("loose", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=3, replication_num=1,
                      partition_cols=["dt"])
    for day in ("2026-11-01", "2026-11-02"):
        commit(cat, "orders", day)
        commit(cat, "loose", day)

    def run(*argv: str) -> str:
        code = main(list(argv))
        out = capsys.readouterr()
        assert code == 0, out.err
        return out.out

    run.catalog = cat
    yield run
    cat.dispose()


def test_a_down_backend_in_group_list_group_show_and_table_show(cli):
    assert json.loads(cli("table", "show", "loose", "--json"))["unavailable_count"] == 0
    assert "unavailable:     none" in cli("table", "show", "loose")
    assert cli("backend", "mark-down", "be2", "--reason", "disk pulled")
    cli("group", "check")
    since = next(b.state_since for b in cli.catalog.backends.list() if b.name == "be2")

    row = json.loads(cli("group", "list", "--json"))[0]
    assert row["IsStable"] is False and datetime.fromisoformat(row["UnstableSince"]) >= since.replace(microsecond=0)
    assert datetime.fromisoformat(row["RelocationStartsAt"]) == (since + timedelta(minutes=30)).replace(microsecond=0)
    assert row["RelocationDue"] is False and row["JoinsShuffle"] is True
    shown = json.loads(cli("group", "show", "g", "--relocate-delay-minutes", "0", "--json"))
    assert shown["relocation_due"] is True and shown["relocation_starts_at"] is None
    assert shown["relocation_backends"] == ["be2"] and shown["unavailable_tables"] == []
    text = cli("group", "show", "g")
    assert "relocation:      starts at" in text and "delay 30 min; be2 down" in text
    assert "joins:           shuffle now: the group is not stable" in text

    table = json.loads(cli("table", "show", "loose", "--json"))
    assert table["unavailable_count"] == 2 and table["unavailable_partitions"] == ["2026-11-01", "2026-11-02"]
    assert table["unavailable_backends"] == ["be2"]
    text = cli("table", "show", "loose")
    assert "unavailable:     2 partitions: a bucket's last verified copy is on be2, not alive" in text
    assert "  - 2026-11-01" in text and "until be2 is alive again" in text

    cli("backend", "mark-up", "be2")
    cli("group", "check")
    row = json.loads(cli("group", "list", "--json"))[0]
    assert (row["IsStable"], row["UnstableSince"], row["RelocationStartsAt"], row["RelocationDue"],
            row["JoinsShuffle"]) == (True, None, None, False, False)
    assert "joins:           colocated (no shuffle)" in cli("group", "show", "g")
    assert json.loads(cli("table", "show", "loose", "--json"))["unavailable_partitions"] == []


def test_join_policy_readable_keeps_joins_bucketed_while_every_bucket_is_readable(cli):
    assert "join policy readable" in cli("group", "set-join-policy", "g", "readable")
    cli("backend", "mark-down", "be2", "--reason", "disk pulled")
    cli("group", "check")
    shown = json.loads(cli("group", "show", "g", "--json"))
    assert shown["stable"] is False and shown["joins_shuffle"] is False and shown["join_policy"] == "readable"
    text = cli("group", "show", "g")
    assert "joins:           stay bucketed (join policy readable; 0 buckets read remotely)" in text
    assert "join policy:     readable" in text
    cli("backend", "mark-down", "be3", "--reason", "second disk")  # some bucket of orders now lives on be2+be3 only
    shown = json.loads(cli("group", "show", "g", "--json"))
    assert shown["joins_shuffle"] is True and "no verified replica on an alive backend" in shown["joins_shuffle_reason"]
    events = [e for e in cli.catalog.events(limit=50) if e.kind == "group.join_policy"]
    assert len(events) == 1 and events[0].detail["new"] == "readable"
