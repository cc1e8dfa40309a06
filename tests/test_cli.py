"""The ``colocate`` command as a user runs it: listings, --json, one-line errors, unchanged catalog."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_colocate.cli import GROUP_COLUMNS, main


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
    assert row["DistCols"] == "bigint" and row["IsStable"] == "true" and row["TableIds"] == "1, 2"


def test_show_group_map(cli):
    make_tables(cli)
    group_id = json.loads(cli("show", "groups", "--json")[1])[0]["GroupId"]
    for ref in (group_id, "g1"):
        code, out, _ = cli("show", "group", ref, "--json")
        rows = json.loads(out)
        assert code == 0 and [r["BucketIndex"] for r in rows] == list(range(6))
        for r in rows:
            ids = [int(x) for x in r["BackendIds"].split(", ")]
            assert len(set(ids)) == 2 and set(ids) <= {1, 2, 3}


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
    assert "run 'colocate init' first" in capsys.readouterr().err


def test_drop_recover_and_alter_from_the_cli(cli):
    make_tables(cli)
    assert cli("table", "drop", "lineitem")[0] == 0
    assert "lineitem" not in cli("table", "list")[1]
    assert cli("table", "recover", "lineitem")[0] == 0
    code, out, _ = cli("table", "alter", "lineitem", "--colocate-with", "")
    assert code == 0 and "group (none)" in out
    assert json.loads(cli("show", "groups", "--json")[1])[0]["TableIds"] == "1"


def test_console_script_runs_without_traceback(tmp_path):
    env = {"COLOCATE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    bin_dir = __import__("pathlib").Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / "colocate"), "show", "group", "x"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("colocate: error:") and "Traceback" not in proc.stderr
