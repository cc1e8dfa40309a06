"""The ``colocate`` command as a user runs it: listings, --json, one-line errors, unchanged catalog."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone

import click
import pytest

from airflow_colocate.cli import GROUP_COLUMNS, main
from airflow_colocate.cli import cli as colocate_cli
from airflow_colocate.cli.base import Command, Group
from airflow_colocate.cli.output import Bullets, Fields, Report, Table, cell, render


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    assert run("init")[0] == 0
    for i in (1, 2, 3):
        (tmp_path / f"be{i}").mkdir()
        assert run("backend", "add", (tmp_path / f"be{i}").as_uri(), "--name", f"be{i}", "--capacity", "10G")[0] == 0
    return run


def make_tables(cli) -> None:
    assert cli("table", "create", "orders", "--columns", "o_orderkey bigint, o_orderdate date, o_totalprice decimal(15,2)",
               "--distributed-by", "o_orderkey", "--buckets", "6", "--replication", "2",
               "--partition-by", "o_orderdate", "--colocate-with", "g1")[0] == 0
    assert cli("table", "create", "lineitem", "--columns", "l_orderkey long, l_linenumber int",
               "--distributed-by", "l_orderkey", "--buckets", "6", "--replication", "2", "--colocate-with", "g1")[0] == 0


def test_show_groups_has_the_seed_columns(cli):
    make_tables(cli)
    code, out, _ = cli("show", "groups")
    assert code == 0
    header = out.splitlines()[1]
    assert [c.strip() for c in header.strip("|").split("|")] == GROUP_COLUMNS
    code, out, _ = cli("show", "groups", "--json")
    rows = json.loads(out)
    assert len(rows) == 1 and list(rows[0]) == GROUP_COLUMNS
    row = rows[0]
    assert row["GroupName"].endswith("_g1") and row["BucketsNum"] == 6 and row["ReplicationNum"] == 2
    assert row["DistCols"] == ["bigint"] and row["IsStable"] is True and row["TableIds"] == [1, 2]


def test_show_group_map(cli):
    make_tables(cli)
    group_id = json.loads(cli("show", "groups", "--json")[1])[0]["GroupId"]
    for ref in (group_id, "g1"):
        code, out, _ = cli("show", "group", ref, "--json")
        rows = json.loads(out)
        assert code == 0 and [r["BucketIndex"] for r in rows] == list(range(6))
        for r in rows:
            assert len(set(r["BackendIds"])) == 2 and set(r["BackendIds"]) <= {1, 2, 3}


@pytest.mark.parametrize("listing", [["backend", "list"], ["table", "list"], ["show", "groups"], ["flag", "list"],
                                     ["events"], ["table", "show", "orders"], ["table", "purge"]])
def test_every_listing_has_json(cli, listing):
    make_tables(cli)
    code, out, _ = cli(*listing, "--json")
    assert code == 0
    json.loads(out)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["table", "create", "customer", "--columns", "c_custkey int", "--distributed-by", "c_custkey",
          "--buckets", "6", "--replication", "2", "--colocate-with", "g1"], "distribution column 1 has type int, the group needs bigint"),
        (["table", "create", "t", "--columns", "a bigint", "--distributed-by", "a", "--buckets", "0"], "invalid bucket count 0"),
        (["table", "create", "t", "--columns", "a bigint", "--distributed-by", "a", "--buckets", "4", "--replication", "4"],
         "needs 4 alive backends"),
        (["table", "create", "../t", "--columns", "a bigint", "--distributed-by", "a", "--buckets", "4"], "invalid table name"),
        (["table", "create", "t", "--columns", "a bigint,", "--distributed-by", "a", "--buckets", "4"], "invalid column definition"),
        (["show", "group", "nope"], "unknown colocation group 'nope'"),
        (["table", "drop", "nope"], "unknown table default.nope"),
        (["backend", "decommission", "be9"], "unknown backend 'be9'"),
        (["backend", "add", "file:///tmp/../x"], "no '..'"),
        (["backend", "add", "file:///x", "--capacity", "lots"], "invalid capacity"),
        (["partition", "add", "orders", "../../etc"], "invalid partition value"),
        (["table", "alter", "orders"], "nothing to alter"),
        (["flag", "set", "disable_colocate_join", "maybe"], "invalid boolean"),
        # argparse's own refusals are one line too, and say where the help is
        (["table", "create", "t", "--columns", "a bigint", "--distributed-by", "a", "--buckets", "x"],
         "colocate table create: argument --buckets: invalid int value: 'x'; see 'colocate table create --help'"),
        (["backend", "nope"], "colocate backend: argument command: invalid choice: 'nope'"),
        (["table", "create", "t"], "the following arguments are required"),
        (["table", "create"], "colocate table create: the following arguments are required: table, --columns, "
                              "--distributed-by, --buckets; see 'colocate table create --help'"),
        (["nope"], "colocate: argument command: invalid choice: 'nope' (choose from 'init', 'backend', "),
        ([], "colocate: the following arguments are required: command; see 'colocate --help'"),
        (["show"], "colocate show: the following arguments are required: command; see 'colocate show --help'"),
        (["jobs", "cancel", "x"], "colocate jobs cancel: argument job_id: invalid int value: 'x'"),
        (["gc", "--grace-minutes", "soon"], "colocate gc: argument --grace-minutes: invalid float value: 'soon'"),
        (["flag", "set", "disable_join", "true"], "argument flag: invalid choice: 'disable_join' (choose from "),
        (["table", "create", "t", "--columns", "a bigint", "--distributed-by", "a", "--buckets"],
         "colocate table create: argument --buckets: expected one argument"),
        (["table", "drop", "orders", "--force=yes"], "colocate table drop: argument --force: takes no value"),
        (["table", "list", "--bogus"], "colocate table list: unrecognized arguments: --bogus; see 'colocate table list --help'"),
        (["table", "drop", "orders", "extra"], "colocate table drop: unrecognized arguments: extra"),
        (["table", "drop", "orders", "--forse"], "unrecognized arguments: --forse (did you mean --force?)"),
        (["show", "groups", "--db", "x"], "--db goes before the command: colocate --db VALUE show groups"),
    ],
)
def test_errors_are_one_line_and_change_nothing(cli, argv, message):
    make_tables(cli)
    before = [cli("show", "groups", "--json")[1], cli("table", "list", "--json", "--all")[1], cli("backend", "list", "--json")[1]]
    events_before = cli("events", "--json", "--limit", "1000")[1]
    code, out, err = cli(*argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("colocate: error: ") and message in err
    assert "Traceback" not in err
    after = [cli("show", "groups", "--json")[1], cli("table", "list", "--json", "--all")[1], cli("backend", "list", "--json")[1]]
    assert after == before
    assert cli("events", "--json", "--limit", "1000")[1] == events_before


def test_uninitialised_catalog_says_run_init(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "fresh"))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    assert main(["show", "groups"]) == 2
    assert not (tmp_path / "fresh").exists()  # issue 47: nothing created
    assert "run 'colocate init' first" in capsys.readouterr().err


def test_drop_recover_and_alter_from_the_cli(cli):
    make_tables(cli)
    assert cli("table", "drop", "lineitem")[0] == 0
    assert "lineitem" not in cli("table", "list")[1]
    assert cli("table", "recover", "lineitem")[0] == 0
    code, out, _ = cli("table", "alter", "lineitem", "--colocate-with", "")
    assert code == 0 and "group (none)" in out
    assert json.loads(cli("show", "groups", "--json")[1])[0]["TableIds"] == [1]
    # the audit log names the group as everything else does, and pages back from an EventId
    newest = json.loads(cli("events", "--json", "--limit", "2")[1])
    assert newest[0]["Kind"] == "table.alter_colocate_with"
    assert newest[0]["Detail"] == {"old_group": "1_g1", "new_group": None}
    older = json.loads(cli("events", "--json", "--limit", "2", "--before", str(newest[-1]["EventId"]))[1])
    assert [e["EventId"] for e in older] == [newest[-1]["EventId"] - 1, newest[-1]["EventId"] - 2]


def test_console_script_runs_without_traceback(tmp_path):
    env = {"COLOCATE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    bin_dir = __import__("pathlib").Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / "colocate"), "show", "group", "x"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("colocate: error:") and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- output


def test_output_prints_a_listing_as_a_table_or_as_json(capsys):
    listing = Table(["Id", "Name", "Note"], [[1, "be1", None], [22, "backend-two", "x"]], title="backends")
    render(listing)
    assert capsys.readouterr().out.splitlines() == [
        "backends",
        "+----+-------------+------+",
        "| Id | Name        | Note |",
        "+----+-------------+------+",
        "| 1  | be1         |      |",
        "| 22 | backend-two | x    |",
        "+----+-------------+------+",
        "2 rows in set",
    ]
    render(listing, as_json=True)  # the title is for people; a script gets the rows, None as null
    assert json.loads(capsys.readouterr().out) == [{"Id": 1, "Name": "be1", "Note": None},
                                                   {"Id": 22, "Name": "backend-two", "Note": "x"}]
    render(Table(["Id"], []))
    assert capsys.readouterr().out.splitlines()[-2:] == ["+----+", "0 rows in set"]


@dataclass
class _Thing:
    name: str
    at: datetime


def test_output_report_blocks_and_its_json_document(capsys):
    at = datetime(2026, 11, 1, 12, 30, tzinfo=timezone.utc)
    report = Report([Fields("table t (id 1)", [("columns", "a bigint"), ("distributed by", "a")]),
                     Table(["A"], [[1]]), Bullets(["be2 is down"], heading="unstable because:"), "done"])
    render(report)
    assert capsys.readouterr().out.splitlines() == [
        "table t (id 1)", "  columns:         a bigint", "  distributed by:  a",
        "+---+", "| A |", "+---+", "| 1 |", "+---+", "1 row in set",
        "unstable because:", "  - be2 is down", "done"]
    render(report, as_json=True)  # no explicit data: the records of its only table
    assert json.loads(capsys.readouterr().out) == [{"A": 1}]
    render(Report([Table(["A"], [[1]])], data={"thing": _Thing("x", at), "pair": (1, 2)}), as_json=True)
    assert json.loads(capsys.readouterr().out) == {"thing": {"name": "x", "at": "2026-11-01T12:30:00+00:00"}, "pair": [1, 2]}
    with pytest.raises(ValueError, match="2 tables needs explicit JSON"):
        render(Report([Table(["A"], []), Table(["B"], [])]), as_json=True)


def _table_cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]


@pytest.mark.parametrize("listing", [["backend", "list", "--wide"], ["table", "list", "--all"], ["show", "groups"], ["show", "group", "g1"],
                                     ["flag", "list"], ["events"], ["jobs", "list"], ["table", "purge"], ["gc", "--dry-run"]])
def test_every_listing_prints_the_same_rows_as_table_and_json(cli, listing):
    make_tables(cli)
    cli("table", "drop", "lineitem")
    code, text, _ = cli(*listing)
    assert code == 0
    code, out, _ = cli(*listing, "--json")
    assert code == 0
    rows = json.loads(out)
    header, *cells = _table_cells(text)
    assert f"{len(rows)} row{'s' if len(rows) != 1 else ''} in set" in text
    assert all(list(r) == header for r in rows)
    assert cells == [[cell(v) for v in r.values()] for r in rows]  # one value, two renderings


def test_backend_list_fits_a_terminal_and_wide_or_json_has_every_field(cli):
    make_tables(cli)
    reason = "disk controller replaced; waiting for the vendor to confirm the firmware before traffic returns"
    assert cli("backend", "mark-down", "be2", "--reason", reason)[0] == 0
    code, text, _ = cli("backend", "list")
    assert code == 0 and max(len(line) for line in text.splitlines()) <= 120
    header, *rows = _table_cells(text)
    assert header == ["BackendId", "Name", "Host", "State", "Since", "Capacity", "Probe", "Reason"]
    be2 = next(r for r in rows if r[1] == "be2")
    assert be2[3] == "down" and be2[4].endswith(" UTC") and be2[7].startswith("disk controller replaced") and be2[7].endswith("…")
    records = json.loads(cli("backend", "list", "--json")[1])
    assert {r["Name"]: r["Reason"] for r in records}["be2"] == reason  # whole in JSON
    assert [c for c in _table_cells(cli("backend", "list", "--wide")[1])[0]] == list(records[0])


def _commands(group: click.Group, path=("colocate",)):
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_every_command_refuses_in_one_line_prints_through_output_and_has_help():
    commands = list(_commands(colocate_cli))
    assert len(commands) >= 37  # 11 commands and families, 26 subcommands (more as commands are added)
    for path, command in commands:
        assert isinstance(command, Group if isinstance(command, click.Group) else Command), path
        assert command.help and len(command.get_short_help_str(80)) > 10, path
    listings = {" ".join(p) for p, c in commands if any(o.name == "as_json" for o in c.params)}
    assert listings == {"colocate backend list", "colocate backend probe", "colocate backend set-root",
                        "colocate table purge", "colocate table list",
                        "colocate table show", "colocate show groups", "colocate show group", "colocate group check",
                        "colocate group list", "colocate group show",
                        "colocate flag list", "colocate gc", "colocate balance", "colocate verify", "colocate import", "colocate jobs list",
                        "colocate events", "colocate doctor", "colocate partition list", "colocate partition purge",
                        "colocate partition expire"}


def test_help_is_printed_and_exits_zero(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: colocate [OPTIONS] COMMAND [ARGS]...") and "balance" in out and "--catalog" in out
    assert main(["table", "create", "-h"]) == 0
    out = capsys.readouterr().out
    assert "Usage: colocate table create [OPTIONS] TABLE" in out and "--distributed-by" in out and "[required]" in out


def test_issue13_refusals_exit_2_and_change_nothing(cli, tmp_path):
    """The six bad inputs a fuzzing round found accepted (issue 13), each refused in one line."""
    make_tables(cli)
    (tmp_path / "nested").mkdir()

    def state():
        return [cli("show", "groups", "--json")[1], cli("table", "list", "--json", "--all")[1],
                cli("backend", "list", "--json")[1], cli("events", "--json", "--limit", "1000")[1]]

    assert cli("table", "drop", "lineitem")[0] == 0
    cases = [
        (["backend", "add", f"file://{tmp_path}//be1", "--name", "be9"], "is already backend be1"),
        (["backend", "add", f"file://{tmp_path}/nowhere/be9", "--name", "be9"], "does not exist: create it"),
        (["partition", "add", "orders", "2026-13-45"], "for column o_orderdate of type date"),
        (["table", "purge", "--retention-hours=-1"], "must not be negative"),
        (["gc", "--grace-minutes=-5"], "must not be negative"),
    ]
    for argv, message in cases:
        before = state()
        code, _, err = cli(*argv)
        assert code == 2 and err.count("\n") == 1 and message in err, (argv, err)
        assert state() == before, argv
    # replication 2 on three backends: two others down leave the drained replicas nowhere to go
    assert cli("backend", "mark-down", "be2")[0] == 0
    before = state()
    code, _, err = cli("backend", "decommission", "be1")
    assert code == 2 and "cannot be decommissioned" in err and state() == before
    assert cli("backend", "mark-up", "be2")[0] == 0
    assert cli("backend", "decommission", "be1")[0] == 0
    code, out, _ = cli("backend", "cancel-decommission", "be1")
    assert code == 0 and "alive again" in out
    assert json.loads(cli("backend", "list", "--json")[1])[0]["State"] == "alive"


# ---------------------------------------------------------------------- typed JSON (issue 27)


def test_output_renders_typed_values_for_people_and_scripts(capsys):
    at = datetime(2026, 11, 1, 12, 30, 5, 123456, tzinfo=timezone.utc)
    listing = Table(["Ids", "Ok", "Group", "At", "Detail"], [[[1, 2], True, None, at, {"a": 1}]])
    render(listing)
    assert _table_cells(capsys.readouterr().out)[1] == ["1, 2", "true", "", "2026-11-01T12:30:05+00:00", '{"a": 1}']
    render(listing, as_json=True)
    assert json.loads(capsys.readouterr().out) == [
        {"Ids": [1, 2], "Ok": True, "Group": None, "At": "2026-11-01T12:30:05+00:00", "Detail": {"a": 1}}]


OPT_STR, OPT_INT = (str, type(None)), (int, type(None))


def _list_of(kind):
    return lambda v: isinstance(v, list) and all(isinstance(x, kind) and not isinstance(x, bool) for x in v)


def _check_types(record: dict, fields: dict) -> None:
    """Every field is there, with its type: a class or a tuple of them (bool is not an int here),
    or a predicate for lists and objects."""
    assert list(record) == list(fields), (list(record), list(fields))
    for name, kind in fields.items():
        value = record[name]
        if callable(kind) and not isinstance(kind, type):
            assert kind(value), (name, value)
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            assert isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)), (name, value, kind)


# One entry per --json listing: how to get rows into it, then the fields of one row (the fields of
# docs/cli-json.md). verify and import need Spark; their documents are checked in
# tests/balance/test_verify.py and tests/operators/test_import.py.
TYPED_LISTINGS = {
    "backend list": (["backend", "list"], {"BackendId": int, "Name": str, "Root": str, "Host": str,
                                           "CapacityBytes": OPT_INT, "State": str, "Since": str, "Reason": OPT_STR,
                                           "ReasonSource": OPT_STR, "LastHeartbeat": OPT_STR, "LastProbeAt": OPT_STR,
                                           "LastProbeOk": (bool, type(None)), "LastProbeDetail": OPT_STR}),
    "backend probe": (["backend", "probe", "--timeout", "10"], {
        "BackendId": int, "Name": str, "State": str, "Reason": OPT_STR, "Probe": str, "Error": OPT_STR,
        "DownSince": OPT_STR,
        "LastHeartbeat": OPT_STR, "Unavailable": bool, "BadReplicas": int}),
    "table list": (["table", "list", "--all"], {"TableId": int, "Table": str, "DistCols": _list_of(str),
                                                "PartitionCols": _list_of(str), "BucketsNum": int, "ReplicationNum": int,
                                                "Group": OPT_STR, "State": str}),
    "table purge": (["table", "purge", "--retention-hours", "0"], {"TableId": int, "Table": str}),
    "show groups": (["show", "groups"], {"GroupId": str, "GroupName": str, "TableIds": _list_of(int), "BucketsNum": int,
                                         "ReplicationNum": int, "DistCols": _list_of(str), "IsStable": bool}),
    "show group": (["show", "group", "g1"], {"BucketIndex": int, "BackendIds": _list_of(int)}),
    "group check": (["group", "check"], {"group": str, "group_id": str, "stable": bool, "reason": OPT_STR,
                                         "reasons": _list_of(str), "problems": int, "checked_at": str}),
    "group list": (["group", "list"], {"GroupId": str, "GroupName": str, "IsStable": bool, "UnstableSince": OPT_STR,
                                       "RelocationStartsAt": OPT_STR, "RelocationDue": bool, "JoinsShuffle": bool,
                                       "UnstableReason": OPT_STR}),
    "flag list": (["flag", "list"], {"Flag": str, "Value": bool}),
    "events": (["events"], {"EventId": int, "Time": str, "Actor": str, "Kind": str, "Subject": str,
                            "Detail": lambda v: isinstance(v, dict)}),
    "gc": (["gc", "--dry-run", "--stale-hours", "0", "--grace-minutes", "0"], {"Reason": str, "Uri": str, "Removed": bool}),
    "jobs list": (["jobs", "list"], {"JobId": int, "Kind": str, "State": str, "Group": OPT_STR, "Step": OPT_STR,
                                     "Moves": OPT_INT, "Done": OPT_INT, "Percent": (float, type(None)),
                                     "EtaSeconds": (float, type(None)), "Updated": str}),
}


@pytest.mark.parametrize("name", list(TYPED_LISTINGS))
def test_every_json_listing_is_typed(cli, name, tmp_path):
    """Booleans, integers, lists and null, never their text: ``"true"``, ``"1, 2"`` or ``""``."""
    from airflow_colocate.catalog import Catalog

    make_tables(cli)
    assert cli("table", "create", "solo", "--columns", "a bigint", "--distributed-by", "a", "--buckets", "2")[0] == 0
    assert cli("table", "drop", "solo")[0] == 0  # a dropped table outside any group (Group null, purgeable)
    cat = Catalog(None, actor="pytest")  # the cli fixture's catalog ($COLOCATE_HOME)
    cat.writes.begin("orders", "2026-11-01")  # a write job, staging: a jobs row, gc garbage at --stale-hours 0
    cat.dispose()
    argv, fields = TYPED_LISTINGS[name]
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert isinstance(document, list) and document, out
    for record in document:
        _check_types(record, fields)
    if name == "table list":
        assert {r["Table"]: r["Group"] for r in document}["default.solo"] is None
    if name == "show groups":
        assert document[0]["TableIds"] == [1, 2] and document[0]["IsStable"] is True


def test_the_typed_listings_are_every_json_listing():
    """A new --json listing gets its fields checked above; the documents that are not lists of rows
    are checked below (table show, balance), with their Spark jobs (verify, import) or by their
    own tests (doctor)."""
    listings = {" ".join(p[1:]) for p, c in _commands(colocate_cli) if any(o.name == "as_json" for o in c.params)}
    assert listings == set(TYPED_LISTINGS) | {"table show", "group show", "balance", "verify", "import", "doctor",
                                              # typed in tests/test_cli_schema_partitions.py, with partitions to list
                                              "partition list", "partition purge", "partition expire",
                                              "backend set-root"}  # tests/health/test_set_root.py


def test_table_show_and_balance_json_are_typed(cli):
    make_tables(cli)
    shown = json.loads(cli("table", "show", "orders", "--json")[1])
    table = shown["table"]
    assert table["dist_cols"] == ["o_orderkey"] and table["columns"][0] == ["o_orderkey", "bigint"]
    assert table["dropped_at"] is None and isinstance(table["group_id"], str) and table["bucket_num"] == 6
    assert shown["partitions"] == []
    code, out, err = cli("balance", "--runner", "local", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert isinstance(summary["dropped"], int) and isinstance(summary["decommissioned"], list)
    assert all(isinstance(g["stable"], bool) and isinstance(g["group_id"], str) for g in summary["groups"])
    assert summary["groups"]


def test_a_read_without_a_catalog_says_there_is_none_and_creates_nothing(tmp_path):
    """Issue 47: without COLOCATE_HOME a read used to create ~/.colocate/catalog.db."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("COLOCATE_HOME", "COLOCATE_CATALOG_URL")}
    env["HOME"] = str(tmp_path / "home")
    run = subprocess.run([str(Path(sys.executable).parent / "colocate"), "show", "groups"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == "", run
    assert run.stderr.strip().splitlines() == [
        f"colocate: error: no catalog at {tmp_path}/home/.colocate/catalog.db: run 'colocate init' first to create one "
        "there, or name an existing one with --catalog URL, COLOCATE_CATALOG_URL or COLOCATE_HOME"], run.stderr
    assert not (tmp_path / "home").exists()
