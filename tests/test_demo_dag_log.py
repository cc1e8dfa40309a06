"""The log a data engineer opens first: the demo's colocated join task, as ``make demo`` leaves it.

``scripts/demo.sh`` runs here itself, for one day and up to its DAG runs (steps 1-8): a catalog,
three backends, the group's tables, then ``airflow dags test colocate_tpch_daily`` as the demo runs
it, whose log the demo keeps in ``$COLOCATE_HOME/dag-<day>.log``. In that log the join task's part
(from Airflow's "starting task_id=revenue_by_priority" to its "end task") must read as a story: no
Java or Python stack trace (Spark's ``FileStreamSink`` once put six there, ~600 of 700 lines) and
under 120 lines in all.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DAY = "2026-11-01"
JOIN_TASK = "revenue_by_priority"
# a JVM frame anywhere in a line (Spark's lines are wrapped in Airflow's), a Python traceback, a Java exception
STACK_FRAME = re.compile(r"\bat [\w$.]+\([\w$]+\.(java|scala):\d+\)|Traceback \(most recent call last\)|Caused by: "
                         r"|\b(java|javax|scala|org\.apache)\.[\w.$]*(Exception|Error)\b")

pytestmark = [pytest.mark.spark]


def task_part(log: str, task_id: str) -> list[str]:
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if f"starting task_id={task_id} " in line)
    end = next(i for i, line in enumerate(lines) if f"end task task_id={task_id} " in line)
    return lines[start:end + 1]


def test_the_demo_join_task_log_is_short_and_has_no_stack_trace(tmp_path):
    home = tmp_path / ".demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "COLOCATE_"))}
    env.update(COLOCATE_HOME=str(home), COLOCATE_DEMO_DATES=DAY, COLOCATE_DEMO_ONLY_DAG_RUNS="1")
    run = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (home / f"dag-{DAY}.log").read_text()
    part = task_part(log, JOIN_TASK)
    joined = "\n".join(part)
    assert "join 1: SORT MERGE JOIN" in joined and "colocate:   colocate: true" in joined, joined  # the story is there
    frames = [line for line in part if STACK_FRAME.search(line)]
    assert not frames, "\n".join(frames[:20])
    assert len(part) < 120, f"{len(part)} lines:\n{joined}"
    assert "committed default.revenue_by_priority partition 2026-11-01" in joined
