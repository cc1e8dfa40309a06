"""The fault tests import the balance lake (a pyarrow writer that keeps the write job's contract)
and the fault primitives of this folder."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "balance"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
