"""Bad input, third pass (issue 48): each class of refusal the issue found, with its example and
two more, refused with exit 2 in one stderr line, the catalog (every table) and the backend roots
(every file and its bytes) unchanged, and no JVM started. No test here starts Spark."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from bad_input import assert_refused, lake, no_jvm  # noqa: F401  (fixtures)

from airflow_colocate.core import validate
from airflow_colocate.core.errors import InvalidArgument, summary

HOSTILE = "ok\n\x1b[31mred\x1b[0m"  # a newline and a terminal escape


# -------------------------------------------------------------- a refused command changed something


def test_a_refused_command_changes_nothing(lake, no_jvm):  # noqa: F811
    # the issue's: the replication change was committed before the bad type was refused
    assert_refused(lake, ["table", "alter", "solo", "--replication", "2", "--add-column", "x biggint"], "biggint")
    assert_refused(lake, ["backend", "reinit", "be1", "--reason", ""], "invalid reason")
    # an import whose files do not fit: refused before a write begins (no partition, version, job or event)
    assert_refused(lake, ["import", "orders", str(lake.src)], "o_totalprice")
    # ours: a group created by the first option, then a narrowing refused; a reason that cannot be kept
    assert_refused(lake, ["table", "alter", "solo", "--colocate-with", "g9", "--widen-column", "v smallint"])
    assert_refused(lake, ["backend", "reinit", "be2", "--reason", "x" * 501], "at most 500")
    assert not no_jvm


def test_several_options_are_one_transaction_and_one_event(lake):  # noqa: F811
    out = lake.ok("table", "alter", "solo", "--replication", "2", "--add-column", "x bigint", "--retention-days", "7")
    assert "replication_num 2" in out and "x bigint" in out and "retention 7 days" in out
    code, out, _ = lake.run("events", "--limit", "1", "--json")
    event = json.loads(out)[0]
    assert event["Kind"] == "table.alter" and event["Subject"] == "default.solo"
    assert [c["kind"] for c in event["Detail"]["changes"]] == [
        "table.set_replication_num", "table.alter_schema", "table.set_retention"]


def test_reinit_puts_the_old_marker_back_when_the_catalog_refuses(lake, monkeypatch):  # noqa: F811
    from airflow_colocate.catalog.backends import Backends
    from airflow_colocate.core.errors import Conflict

    def refuse(*args, **kwargs):
        raise Conflict("refused by the catalog")

    monkeypatch.setattr(Backends, "reinit", refuse)
    assert_refused(lake, ["backend", "reinit", "be1", "--reason", "disk replaced"], "refused by the catalog")


# ---------------------------------------------------------------- internal errors instead of refusals


@pytest.mark.parametrize("argv, words", [
    (["balance", "--dry-run", "--threshold", "nan"], "finite"),
    (["partition", "purge", "--window-hours", "inf"], "finite"),
    (["table", "purge", "--retention-hours", "nan"], "finite"),
    (["gc", "--grace-minutes", "-inf"], "finite"),
    (["jobs", "cancel", "99999999999999999999999"], "at most 9223372036854775807"),  # the issue's
    # ours
    (["backend", "add", "file:///nowhere", "--capacity", "99999999999999999999T"], "invalid capacity"),
    (["events", "--limit", "1" + "0" * 30], "at most"),
])
def test_no_internal_error(lake, no_jvm, argv, words):  # noqa: F811
    assert_refused(lake, argv, words)
    assert not no_jvm


def test_relocate_delay_from_the_environment_is_refused_not_crashed(lake, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "nan")
    assert_refused(lake, ["group", "list"], "COLOCATE_RELOCATE_DELAY_MINUTES")


# ------------------------------------------------------------------------------ refused late


def test_refused_before_any_jvm(lake, no_jvm, tmp_path):  # noqa: F811
    assert_refused(lake, ["balance", "--group", "nope"], "nope")  # the issue's
    assert_refused(lake, ["import", "orders", str(lake.src), "--partitions", "2026-12-31"], "2026-12-31")  # the issue's
    # ours: a source missing a column of the table, and a source column of another type
    missing = lake.source("o_orderdate=2026-11-02", {"o_orderkey": pa.array([1], pa.int64())}, tmp_path / "missing")
    assert_refused(lake, ["import", "orders", str(missing)], "'o_totalprice' (double) is missing")
    other = lake.source("o_orderdate=2026-11-02", {"o_orderkey": pa.array([1], pa.int64()),
                                                   "o_totalprice": pa.array([1.5], pa.float64()),
                                                   "o_extra": pa.array([1], pa.int32())}, tmp_path / "extra")
    assert_refused(lake, ["import", "orders", str(other)], "'o_extra' (int) is not a column")
    assert not no_jvm


# ------------------------------------------------------------------------ accepted although wrong


@pytest.mark.parametrize("argv, words", [
    (["balance", "--dry-run", "--threshold=-1"], "must not be negative"),  # the issue's
    (["group", "list", "--relocate-delay-minutes=-30"], "must not be negative"),
    (["backend", "mark-down", "be1", "--reason", "x" * 100_000], "at most 500"),
    (["group", "mark-unstable", "g1", "--reason", HOSTILE], "printable"),
    (["import", "orders", ""], "invalid source"),
    (["doctor", "--timeout=-1"], "expected 0.001 or more"),
    # ours
    (["gc", "--stale-hours=-1", "--dry-run"], "must not be negative"),
    (["backend", "set-root", "be1", "file:///x\x07y"], "printable"),
    (["backend", "probe", "be1", "nope"], "unknown backend 'nope'"),  # be1 was probed, nope ignored, exit 0
])
def test_wrong_values_are_refused(lake, no_jvm, argv, words):  # noqa: F811
    err = assert_refused(lake, argv, words)
    assert "\x1b" not in err  # a hostile value is quoted escaped, never printed raw
    assert not no_jvm


def test_a_hostile_actor_from_the_environment_is_refused(lake, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COLOCATE_ACTOR", HOSTILE)
    err = assert_refused(lake, ["backend", "mark-down", "be1"], "$COLOCATE_ACTOR")
    assert "\x1b" not in err
    monkeypatch.setenv("COLOCATE_ACTOR", "a" * 129)  # the actor column holds 128
    assert_refused(lake, ["flag", "set", "disable_colocate_join", "true"], "$COLOCATE_ACTOR")


# ------------------------------------------------------------------------- one line, not 89


def test_a_library_message_is_one_line(lake, no_jvm):  # noqa: F811
    err = assert_refused(lake, ["backend", "set-root", "be1", "hdfs://nn/be1"])  # the issue's: 89 lines
    assert "--verbose" in err or len(err) < 400
    code, _, err = lake.run("--verbose", "backend", "set-root", "be1", "hdfs://nn/be1")
    assert code == 2 and err.startswith("colocate: error: ")
    # ours: the same for a new backend, and a JVM's Py4J error reduced to its exception's line
    assert_refused(lake, ["backend", "add", "hdfs://nn/be9", "--name", "be9"])
    py4j = ("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
            ": org.apache.spark.SparkException: Could not parse Master URL: 'local[abc]'\n"
            "\tat org.apache.spark.SparkContext$.createTaskScheduler(SparkContext.scala:3215)\n"
            "\tat org.apache.spark.SparkContext.<init>(SparkContext.scala:577)\n")
    assert summary(py4j) == ("org.apache.spark.SparkException: Could not parse Master URL: 'local[abc]'", True)
    # the second: a master Spark cannot parse is refused before a JVM is asked to
    for command in (["doctor"], ["verify"], ["balance"], ["import", "orders", str(lake.src)]):
        assert_refused(lake, [*command, "--master", "local[abc]"], "invalid Spark master")
    assert not no_jvm


# ------------------------------------------------------------------------------------ doctor


def test_doctor_leaves_the_backend_roots_as_they_were(lake, no_jvm):  # noqa: F811
    before = lake.snapshot()
    code, _, err = lake.run("doctor")
    assert code in (0, 1) and "internal error" not in err, err
    assert lake.snapshot()[1] == before[1]  # no _colocate/heartbeat folder left behind
    assert not no_jvm


# ------------------------------------------------------------------------------ the validators


def test_validators():
    assert validate.number("1.5", "x", minimum=0) == 1.5
    for bad in ("nan", "inf", "-inf", "1e400", "", "x", None):
        with pytest.raises(InvalidArgument):
            validate.number(bad, "x")
    assert validate.integer("9223372036854775807", "id") == 2 ** 63 - 1
    with pytest.raises(InvalidArgument, match="at most"):
        validate.integer(2 ** 63, "id")
    assert validate.reason("  disk pulled ") == "disk pulled" and validate.reason(None) is None
    for bad in ("a\nb", "a\tb", "\x1b[31m", "\x00", "x" * 501):
        with pytest.raises(InvalidArgument):
            validate.reason(bad)
    with pytest.raises(InvalidArgument, match="invalid source"):
        validate.uri("  ", "source")
    assert validate.duration("90", "delay", unit="minutes").total_seconds() == 5400


def test_a_value_stored_before_the_checks_is_shown_escaped(lake):  # noqa: F811
    """A reason written raw by an older release is printed escaped in a table, raw in JSON."""
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{lake.home / 'catalog.db'}")
    with engine.begin() as c:
        c.execute(text("UPDATE backends SET state = 'down', state_reason = :r WHERE name = 'be1'"),
                  {"r": "admin: " + HOSTILE})
    engine.dispose()
    out = lake.ok("backend", "list")
    assert "\x1b" not in out and "ok\\n\\x1b[31mred" in out
    row = json.loads(lake.ok("backend", "list", "--json"))[0]
    assert HOSTILE in row["Reason"]  # the data itself is unchanged
