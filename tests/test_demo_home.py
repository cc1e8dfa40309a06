"""Issue 47: a copy of the demo home, with the README's exports, runs Airflow on the copy only.

The demo's Airflow home is made as ``scripts/demo.sh`` makes it (``scripts/demo_airflow_home.sh``:
``airflow db migrate``, then an ``airflow.cfg`` naming ``${AIRFLOW_HOME}``), with a catalog beside
it (``colocate init``). The home is copied and the original moved away; the README's ``export``
lines, run in a shell whose ``$PWD/.demo`` is the copy, then give an Airflow whose metadata
database, logs and plugins folder and whose ``colocate`` connection's catalog are all inside the
copy, and ``airflow db check`` reaches the copy's database without recreating the original.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

PROBE = """
import json
from airflow.configuration import conf
from airflow_colocate.hooks.catalog import ColocateCatalogHook
print(json.dumps({"db": conf.get("database", "sql_alchemy_conn"), "logs": conf.get("logging", "base_log_folder"),
                  "plugins": conf.get("core", "plugins_folder"), "catalog": ColocateCatalogHook().catalog_url()}))
"""


def readme_exports() -> str:
    text = (REPO / "README.md").read_text()
    block = text[text.index("### Run the example DAGs under a real scheduler"):]
    block = block[block.index("```bash") + len("```bash"):]
    block = block[:block.index("```")]
    lines = [line for line in block.splitlines() if line.startswith("export ")]
    assert any(line.startswith("export COLOCATE_HOME=$PWD/.demo") for line in lines), lines
    return "\n".join(lines)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "COLOCATE_"))}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    return env


def test_a_copied_demo_home_runs_on_the_copy_only(tmp_path):
    original = tmp_path / "original" / ".demo"
    (original / "airflow").mkdir(parents=True)
    env = {**clean_env(), "COLOCATE_HOME": str(original), "AIRFLOW_HOME": str(original / "airflow"),
           "AIRFLOW_BIN": str(BIN / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    made = subprocess.run([str(REPO / "scripts" / "demo_airflow_home.sh")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    init = subprocess.run([str(BIN / "colocate"), "init"], env=env, capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    cfg = (original / "airflow" / "airflow.cfg").read_text()
    assert str(original) not in cfg and re.search(r"^sql_alchemy_conn = .*\$\{AIRFLOW_HOME\}", cfg, re.M)

    project = tmp_path / "copy"
    copy = project / ".demo"
    shutil.copytree(original, copy, symlinks=True)
    shutil.move(str(tmp_path / "original"), str(tmp_path / "moved-away"))  # nothing may use it now

    script = f"{readme_exports()}\nairflow db check >/dev/null 2>&1 || exit 3\n{sys.executable} -c '{PROBE}'"
    run = subprocess.run(["bash", "-c", script], cwd=project, env=clean_env(), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    where = json.loads(run.stdout.strip().splitlines()[-1])
    assert where["db"] == f"sqlite:///{copy}/airflow/airflow.db", where
    assert where["logs"] == f"{copy}/airflow/logs" and where["plugins"] == f"{copy}/airflow/plugins", where
    assert where["catalog"] == f"sqlite:///{copy}/catalog.db", where
    assert not (tmp_path / "original").exists()  # nothing recreated the original home
