"""The new `colocate` commands as a user runs them: probe, group check, balance, jobs."""

from __future__ import annotations

import json
import re

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main
from balance_lake import Clock, Lake, assert_whole


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    monkeypatch.delenv("COLOCATE_RELOCATE_DELAY_MINUTES", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    assert run("init")[0] == 0
    for i in (1, 2, 3):
        (tmp_path / f"be{i}").mkdir()
        assert run("backend", "add", (tmp_path / f"be{i}").as_uri(), "--name", f"be{i}")[0] == 0
    assert run("table", "create", "orders", "--columns", "id bigint, v string, dt date", "--distributed-by", "id",
               "--buckets", "4", "--replication", "2", "--partition-by", "dt", "--colocate-with", "g")[0] == 0
    cat = Catalog(f"sqlite:///{tmp_path / 'home' / 'catalog.db'}")
    lake = Lake(cat, Clock(), tmp_path)
    lake.write("orders", "2026-11-01", range(200))
    run.catalog, run.lake, run.tmp = cat, lake, tmp_path
    yield run
    cat.dispose()


def test_probe_and_group_check_and_reasons(cli):
    code, out, _ = cli("backend", "probe", "--json")
    assert code == 0 and [r["Probe"] for r in json.loads(out)] == ["ok", "ok", "ok"]
    assert cli("backend", "mark-down", "be2", "--reason", "disk")[0] == 0
    code, out, _ = cli("show", "groups", "--json")
    assert json.loads(out)[0]["IsStable"] is False  # reflected at once
    code, out, _ = cli("group", "check", "g")
    assert code == 0 and "| false" in out and "backend be2 is down" in out and "admin: disk" in out
    code, out, _ = cli("show", "group", "g")
    assert "UNSTABLE" in out and "unstable because" in out and "- backend be2 is down" in out
    code, out, _ = cli("backend", "probe", "be2")
    assert code == 0 and "| down" in out  # the admin's mark holds
    assert cli("backend", "mark-up", "be2")[0] == 0
    code, out, _ = cli("group", "check", "--json")
    assert json.loads(out)[0]["stable"] is True


def test_balance_dry_run_then_run_then_jobs(cli, spark):
    (cli.tmp / "be4").mkdir()
    assert cli("backend", "add", (cli.tmp / "be4").as_uri(), "--name", "be4")[0] == 0
    code, out, _ = cli("balance", "--dry-run")
    assert code == 0 and "dry run" in out and "balance, 2 moves" in out and "| be4" in out
    assert cli.catalog.jobs.list(kinds=["balance"]) == []
    code, out, err = cli("balance", "--grace-minutes", "0")
    assert code == 0, err
    assert "| balance | done" in out and "| true" in out
    assert_whole(cli.catalog)
    code, out, _ = cli("jobs", "list", "--kind", "balance", "--json")
    (job,) = json.loads(out)
    assert job["State"] == "done" and job["Step"] == "finished" and job["Moves"] == 2
    code, _, err = cli("jobs", "cancel", str(job["JobId"]))
    assert code == 0  # a finished job stays finished
    code, _, err = cli("balance", "--strategy", "weight", "--dry-run")
    assert code == 2 and "argument --strategy: invalid choice: 'weight'" in err and err.count("\n") == 1


def test_balance_with_the_local_runner_needs_no_spark(cli):
    (cli.tmp / "be4").mkdir()
    assert cli("backend", "add", (cli.tmp / "be4").as_uri(), "--name", "be4")[0] == 0
    code, out, err = cli("balance", "--runner", "local", "--grace-minutes", "0")
    assert code == 0, err
    assert "| balance | done" in out and "| true" in out
    assert_whole(cli.catalog)
    # issue 47: the plan is said before the job runs, not after it finished
    progress = (out + err).splitlines()
    plan_at = next(i for i, line in enumerate(progress) if "plan: bucket" in line and "-> be4" in line)
    assert plan_at < next(i for i, line in enumerate(progress) if "finished" in line), progress


def test_balance_inside_the_relocate_delay_says_so_and_relocate_now_does_not_wait(cli, monkeypatch):
    """Issue 30: a down backend inside its delay is named with the time its relocation starts;
    ``--relocate-now`` relocates it at once and records who asked (the OS user or COLOCATE_ACTOR)."""
    monkeypatch.setenv("COLOCATE_ACTOR", "oncall-ana")
    assert cli("backend", "mark-down", "be2", "--reason", "disk pulled")[0] == 0
    code, out, err = cli("balance", "--runner", "local", "--grace-minutes", "0")
    assert code == 0, err
    assert re.search(r"nothing moved: relocation of be2's buckets starts at (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC "
                     r"\(delay 30 min\); run with --relocate-now to start it now", out), out
    code, out, err = cli("balance", "--dry-run", "--relocate-now")
    assert code == 0 and "relocate, 3 moves" in out and "pending" not in out, out
    assert " -> " not in out and out.count("| be2 ") == 3, out  # issue 47: the moves once, as the table
    assert [e for e in cli.catalog.events(limit=100) if e.kind == "balance.relocate_now"] == []  # a dry run records nothing
    code, out, err = cli("balance", "--runner", "local", "--grace-minutes", "0", "--relocate-now", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["pending"] == [] and result["outcome"].startswith("done: 1 balance job"), result["outcome"]
    be2 = cli.catalog.backends.get("be2").id
    assert be2 not in {be for row in cli.catalog.groups.get("g").bucket_map for be in row}
    assert_whole(cli.catalog)
    (event,) = [e for e in cli.catalog.events(limit=100) if e.kind == "balance.relocate_now"]
    assert event.subject == "be2" and event.actor == "oncall-ana" and event.detail["delay_minutes"] == 30
