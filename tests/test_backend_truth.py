"""Issue 30 (4): what the CLI and the probe say about a backend is the truth, and one change names
one actor.

A mark-down keeps the reason as the operator typed it (not "admin: admin"), apart from who set it
(``reason_source``) and from who did it (the event's actor: ``--actor``, ``$COLOCATE_ACTOR`` or the
OS user); a second mark-down changes nothing and says since when; the probe's summary never
counts a backend an admin holds down as alive, and its result keeps "reachable" apart from the
state. Real catalog (SQLite), real backend folders, the ``colocate`` entry point as a user runs it.
"""

from __future__ import annotations

import getpass
import json

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main
from airflow_colocate.jobs.health import probe_backends, probe_line


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COLOCATE_CATALOG_URL", raising=False)
    monkeypatch.delenv("COLOCATE_ACTOR", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    assert run("init")[0] == 0
    for i in (1, 2, 3):
        (tmp_path / f"be{i}").mkdir()
        assert run("backend", "add", (tmp_path / f"be{i}").as_uri(), "--name", f"be{i}")[0] == 0
    run.root = tmp_path
    return run


def backends(cli) -> dict[str, dict]:
    code, out, _ = cli("backend", "list", "--json")
    assert code == 0
    return {b["Name"]: b for b in json.loads(out)}


def events(cli, kind: str = "backend.state") -> list[dict]:
    code, out, _ = cli("events", "--kind", kind, "--json")
    assert code == 0
    return json.loads(out)


def test_mark_down_keeps_the_reason_as_given_and_the_actor_apart(cli):
    code, out, err = cli("--actor", "alice", "backend", "mark-down", "be2", "--reason", "disk pulled")
    assert code == 0 and out.strip() == "backend be2 (id 2) is now down (admin: disk pulled)", (out, err)
    be2 = backends(cli)["be2"]
    assert (be2["State"], be2["Reason"], be2["ReasonSource"]) == ("down", "disk pulled", "admin")
    (event,) = events(cli)
    assert event["Actor"] == "alice" and event["Detail"] == {"id": 2, "old": "alive", "new": "down",
                                                             "reason": "disk pulled"}
    # the group check and the unstable reason name the reason once, not "admin: admin"
    assert "admin: admin" not in json.dumps(events(cli, "backend.state"))

    # again: nothing changes, and it says since when and why
    code, out, _ = cli("backend", "mark-down", "be2", "--reason", "another reason")
    assert code == 0
    assert out.strip() == f"backend be2 (id 2) is already down since {be2['Since']} (admin: disk pulled): nothing changed"
    assert len(events(cli)) == 1 and backends(cli)["be2"] == be2

    # no --actor: the OS user (or $COLOCATE_ACTOR); no --reason: no reason, not the word "admin"
    assert cli("backend", "mark-up", "be2")[0] == 0
    assert cli("backend", "mark-down", "be3")[0] == 0
    be3 = backends(cli)["be3"]
    assert (be3["Reason"], be3["ReasonSource"]) == (None, "admin")
    newest = events(cli)[0]
    assert newest["Actor"] == getpass.getuser() and newest["Detail"]["reason"] is None
    code, out, _ = cli("backend", "mark-up", "be1")
    assert code == 0 and out.strip().startswith("backend be1 (id 1) is already alive since ")


def test_actor_from_the_environment_and_a_refused_actor(cli, monkeypatch):
    monkeypatch.setenv("COLOCATE_ACTOR", "oncall:bob")
    assert cli("backend", "mark-down", "be1", "--reason", "fsck")[0] == 0
    assert events(cli)[0]["Actor"] == "oncall:bob"
    assert cli("--actor", "carol", "backend", "mark-up", "be1")[0] == 0  # --actor wins over the environment
    assert events(cli)[0]["Actor"] == "carol"
    before = events(cli)
    for bad in ("", "   ", "x" * 129, "two\nlines"):
        code, out, err = cli("--actor", bad, "backend", "mark-down", "be1")
        assert code == 2 and out == "" and err.count("\n") == 1 and "invalid actor" in err, (bad, err)
    assert events(cli) == before


def test_probe_words_and_result_agree(cli):
    cat = Catalog(actor="pytest")
    try:
        assert cli("backend", "mark-down", "be2", "--reason", "disk pulled")[0] == 0
        results = probe_backends(cat, timeout=10, sample=0)
        line = probe_line(results)
        assert line.endswith(": 2 alive; be2 down (admin: disk pulled), reachable"), line
        be2 = {r.backend.name: r for r in results}["be2"]
        result = be2.to_dict()
        assert (result["state"], result["reachable"], result["state_reason"], result["reason_source"]) == \
            ("down", True, "disk pulled", "admin")
        assert "ok" not in result
        listed = backends(cli)
        assert listed["be2"]["LastProbeOk"] is True and listed["be2"]["LastProbeDetail"] == "heartbeat ok"
        assert listed["be2"]["LastProbeAt"] and listed["be2"]["LastHeartbeat"] and listed["be2"]["State"] == "down"

        (cli.root / "be3").rename(cli.root / "be3.unplugged")  # the disk is gone: the probe finds it, says why
        results = {r.backend.name: r for r in probe_backends(cat, timeout=10, sample=0)}
        line = probe_line(list(results.values()))
        assert ": 1 alive; be2 down (admin: disk pulled), reachable; be3 down (probe: OSError: root " in line, line
        assert results["be3"].to_dict()["reachable"] is False and results["be3"].backend.reason_source == "probe"
        be3 = backends(cli)["be3"]
        assert be3["LastProbeOk"] is False and "is missing" in be3["LastProbeDetail"] and be3["ReasonSource"] == "probe"
        assert be3["Reason"] == results["be3"].error  # the probe's own words, without "probe:" in front
        code, out, _ = cli("backend", "probe", "be2", "--json")
        (row,) = json.loads(out)
        assert code == 0 and (row["State"], row["Reason"], row["Probe"]) == ("down", "admin: disk pulled", "ok")

        # an admin marks the probe-down backend down: the mark takes hold with its reason (an event),
        # so the disk coming back does not bring it up
        code, out, _ = cli("--actor", "alice", "backend", "mark-down", "be3", "--reason", "disk replaced")
        assert code == 0 and out.strip() == "backend be3 (id 3) is now down (admin: disk replaced)"
        assert events(cli)[0]["Detail"] == {"id": 3, "old": "down", "new": "down", "reason": "disk replaced"}
        assert backends(cli)["be3"]["Since"] == be3["Since"]  # down since the probe found it
        (cli.root / "be3.unplugged").rename(cli.root / "be3")  # the disk is back, but the admin said down
        probe_backends(cat, timeout=10, sample=0)
        be3 = backends(cli)["be3"]
        assert (be3["State"], be3["Reason"], be3["LastProbeOk"]) == ("down", "disk replaced", True)
    finally:
        cat.dispose()
