"""Property: random bytes, huge values, nan/inf, negative and empty values fed to every numeric and
free-text option and argument of every ``colocate`` command end in exit 0 or 2, never an internal
error, and an exit 2 changes nothing (every catalog table, every file under the backend roots).

Commands that would start Spark (verify, import, doctor --master; balance runs ``--dry-run``)
meet a stand-in that refuses as a command would (exit 2): whatever they did before it is checked
to be nothing. ``doctor``, ``gc`` and ``backend probe`` exit 1 by design when they find a problem
(a timeout too short for a backend); that exit is allowed for them alone, with its own lines and
no internal error. Runs in process through ``main``, 300 examples in about 10 s
(``COLOCATE_FUZZ_EXAMPLES=3000`` for a longer hunt)."""

from __future__ import annotations

import os

import click
import pyarrow as pa
import pytest
from bad_input import Lake, block_jvm
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from airflow_colocate.cli import cli as colocate_cli
from airflow_colocate.cli import params
from airflow_colocate.core.errors import ColocateError

FREE = (click.types.StringParamType, params.Int, params.Float, params.Text, params.Uri, params.Actor, params.Master)
ENVIRONMENT = [(["backend", "mark-down", "be2"], "$COLOCATE_ACTOR"),
               (["group", "list"], "$COLOCATE_RELOCATE_DELAY_MINUTES")]  # read like the options they stand for
PLACEHOLDER = {"table": "orders", "backend": "be1", "group": "g1", "value": "2026-11-02", "job_id": "1",
               "flag": "disable_colocate_join", "backends": "be1"}
REQUIRED = {"table create": ["--columns", "k bigint", "--distributed-by", "k", "--buckets", "2"],
            "backend reinit": ["--reason", "fuzz"], "balance": ["--dry-run"]}
MAY_EXIT_1 = {"doctor", "gc", "backend probe"}  # their problem lines, by design
SKIP = {("doctor", "conn_id")}  # Airflow's connection lookup


class SparkWouldStart(ColocateError):
    pass


def _slots():
    """(command path, argv before the fuzzed slot, the slot: an option name or an argument index)."""

    def walk(group: click.Group, path: list[str]):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from walk(command, [*path, name])
            else:
                yield [*path, name], command

    out = [(["backend", "list"], "--" + p.name.replace("_", "-")) for p in colocate_cli.params
           if isinstance(p, click.Option) and isinstance(p.type, FREE)] + ENVIRONMENT
    for path, command in walk(colocate_cli, []):
        key = " ".join(path)
        for p in command.params:
            if not isinstance(p.type, FREE) or (key, p.name) in SKIP:
                continue
            out.append((path, p.opts[0] if isinstance(p, click.Option) else p.name))
    return out


SLOTS = _slots()
VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "NaN", "1e309", "-1", "-0", "0", "", "  ", "-30", "0.0000001",
                     "99999999999999999999999", "-99999999999999999999999", "x" * 100_000, "a\nb\x1b[31m", "\x00",
                     "../..", "file:///", "be1", "g1", "orders"]),
    st.integers(min_value=-2 ** 80, max_value=2 ** 80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=30),
    st.binary(max_size=30).map(lambda b: b.decode("utf-8", "surrogateescape")),  # bytes as argv carries them
)


def _argv(path: list[str], slot: str, value: str, lake: Lake) -> list[str]:
    if slot.startswith("$"):
        return path
    command = colocate_cli
    for word in path:
        command = command.commands[word]
    key = " ".join(path)
    args = []
    for p in command.params:
        if isinstance(p, click.Argument):
            given = value if p.name == slot else PLACEHOLDER.get(p.name, "")
            if p.name == "root":
                given = value if slot == "root" else (lake.roots / "spare").as_uri()
            if p.name == "source":
                given = value if slot == "source" else str(lake.good)
            args.append(given)
    opts = [f"{slot}={value}"] if slot.startswith("--") else []
    if path == ["backend", "list"] and slot.startswith("--"):
        return [*opts, *path]  # a root option
    return [*path, *args, *REQUIRED.get(key, []), *opts]


@pytest.fixture
def fuzz_lake(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    for name in ("COLOCATE_CATALOG_URL", "COLOCATE_ACTOR", "COLOCATE_RELOCATE_DELAY_MINUTES"):
        monkeypatch.delenv(name, raising=False)

    def refuse(*args, **kwargs):
        raise SparkWouldStart("spark would start here (the test's stand-in)")

    block_jvm(monkeypatch, refuse)
    lake = Lake(tmp_path, capsys).build()
    (lake.roots / "spare").mkdir()
    lake.good = lake.source("o_orderdate=2026-11-02", {"o_orderkey": pa.array([1], pa.int64()),
                                                       "o_totalprice": pa.array([1.5], pa.float64())},
                            tmp_path / "good")
    yield lake
    lake.close()


def test_slots_cover_every_command_with_free_values():
    commands = {" ".join(path) for path, _ in SLOTS}
    assert {"balance", "gc", "table purge", "partition purge", "jobs cancel", "backend reinit", "doctor",
            "group list", "import", "backend set-root", "table alter"} <= commands
    assert len(SLOTS) > 60


@settings(max_examples=int(os.environ.get("COLOCATE_FUZZ_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(slot=st.sampled_from(SLOTS), value=VALUES)
def test_no_exit_but_0_or_2_and_no_change_after_2(fuzz_lake, slot, value):
    path, name = slot
    argv = _argv(path, name, value, fuzz_lake)
    before = fuzz_lake.snapshot()
    if name.startswith("$"):
        assume("\x00" not in value)  # no environment can hold one
        os.environ[name[1:]] = value
    try:
        code, _, err = fuzz_lake.run(*argv)
    finally:
        if name.startswith("$"):
            os.environ.pop(name[1:], None)
    shown = (argv[:8], err[-600:])
    assert "internal error" not in err, shown
    assert code in (0, 2) or (code == 1 and " ".join(path) in MAY_EXIT_1), (code, shown)
    if code == 2:
        assert err.count("\n") == 1, shown
        assert fuzz_lake.snapshot() == before, shown
