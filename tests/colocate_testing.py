"""Helpers shared by test modules (conftest fixtures cannot be imported by name)."""

from __future__ import annotations

from pathlib import Path

from airflow_colocate.catalog import Catalog


def add_local_backends(catalog: Catalog, root: Path, n: int = 3, **kwargs) -> list:
    """``n`` backends in local folders, each its own host (failure domain)."""
    out = []
    for i in range(1, n + 1):
        path = root / f"be{i}"
        path.mkdir(parents=True, exist_ok=True)
        out.append(catalog.add_backend(path.as_uri(), name=f"be{i}", **kwargs))
    return out
