"""Issue 16 (5): a repair while a backend is down for less than the relocate delay says why it
waits; the probe is one summary line; an unstable group is a WARNING. Issue 30: such a run moved
nothing, so it ends skipped with the time relocation starts, its report still in XCom."""

from __future__ import annotations

import re

import pytest

from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.operators.balance import ColocateBalanceOperator


LINE = re.compile(r"\[(?P<level>\w+)\s*\] (?P<message>colocate: .*?)\s+\[airflow\.task\.operators\.")


def logged(capfd) -> list[tuple[str, str]]:
    """(level, message) of the operator's own lines, as Airflow's task logger renders them."""
    out, err = capfd.readouterr()
    return [(m["level"], m["message"]) for m in map(LINE.search, (out + err).splitlines()) if m]


class TaskInstance:
    """What the operator uses of the task instance: its XCom push."""

    def __init__(self) -> None:
        self.pushed: dict = {}

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value


def test_repair_says_it_waits_for_the_relocate_delay(colocate_env, tmp_path, monkeypatch, capfd):
    cat = colocate_env
    cat.tables.create("orders", parse_columns("id bigint"), ["id"], bucket_num=6, replication_num=2, colocate_with="g")
    be2 = next(b for b in cat.backends.list() if b.name == "be2")
    root = be2.root_uri.removeprefix("file://")
    (tmp_path / "backends" / "be2").rename(tmp_path / "be2-unplugged")  # the disk is gone: the probe fails
    assert root.endswith("be2")
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "30")
    from airflow.sdk.exceptions import AirflowSkipException

    op = ColocateBalanceOperator(task_id="repair")
    capfd.readouterr()
    ti = TaskInstance()
    with pytest.raises(AirflowSkipException) as skipped:
        op.execute(context={"ti": ti})
    result = ti.pushed["return_value"]
    ours = logged(capfd)
    assert str(skipped.value) == result["outcome"]
    assert re.fullmatch(r"nothing moved: relocation of be2's buckets starts at (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC \(delay 30 min\); "
                        r"trigger with relocate_now to start it now", result["outcome"]), result["outcome"]

    probes = [m for _, m in ours if m.startswith("colocate: probed ")]
    assert len(probes) == 1 and not any(m.startswith("colocate: backend ") for _, m in ours), ours
    assert re.fullmatch(r"colocate: probed 3 backends in [\d.]+s: 2 alive; be2 down \(.+\)", probes[0]), probes[0]
    waits = [(lvl, m) for lvl, m in ours if "relocation starts after" in m]
    assert [lvl for lvl, _ in waits] == ["warning"], ours
    assert re.fullmatch(r"colocate: be2 down (\d+ s|\d+ min); relocation starts after 30 min "
                        r"\(COLOCATE_RELOCATE_DELAY_MINUTES\), in \d+ min", waits[0][1]), waits[0][1]
    unstable = [(lvl, m) for lvl, m in ours if "UNSTABLE" in m]
    assert unstable and all(lvl == "warning" for lvl, _ in unstable) and "be2" in unstable[0][1]
    assert result["groups"][0]["stable"] is False
    # the run's summary (XCom, the CLI's report) says it too
    assert len(result["waiting"]) == 1 and result["waiting"][0].startswith("be2 down ")
    assert "relocation starts after 30 min (COLOCATE_RELOCATE_DELAY_MINUTES)" in result["waiting"][0]

    # with the operator's own delay, the line names that instead
    with pytest.raises(AirflowSkipException, match=r"\(delay 45 min\)"):
        ColocateBalanceOperator(task_id="repair2", relocate_delay_minutes=45, probe=False).execute(context={})
    assert any(re.search(r"relocation starts after 45 min \(relocate_delay_minutes\)", m)
               for level, m in logged(capfd) if level == "warning")
