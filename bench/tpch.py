"""TPC-H data for the benchmarks, generated once with tpchgen-cli and cached under bench/data."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def tpch(table: str, scale: float = 1) -> Path:
    """Path of ``table``.parquet at scale factor ``scale``."""
    out = DATA / f"sf{scale:g}"
    path = out / f"{table}.parquet"
    if not path.exists():
        exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
        out.mkdir(parents=True, exist_ok=True)
        print(f"generating TPC-H {table} at scale factor {scale:g} ...", flush=True)
        subprocess.run([exe, "parquet", "-s", f"{scale:g}", f"--tables={table}", f"--output-dir={out}"], check=True)
    return path
