"""Where this package keeps its files on the machine that runs the control plane."""

from __future__ import annotations

import os
from pathlib import Path


def colocate_home() -> Path:
    """``$COLOCATE_HOME``, else ``~/.colocate``: the embedded catalog, landed files, job plans."""
    return Path(os.environ.get("COLOCATE_HOME") or Path.home() / ".colocate").expanduser()


def default_work_dir() -> Path:
    """Where plans and reports of Spark jobs go unless a connection or operator says otherwise."""
    return Path(os.environ.get("COLOCATE_WORK_DIR") or colocate_home() / "runs")
