"""Helpers shared by test modules (conftest fixtures cannot be imported by name)."""

from __future__ import annotations

import os
from pathlib import Path

from airflow_colocate.catalog import Catalog


def add_local_backends(catalog: Catalog, root: Path, n: int = 3, **kwargs) -> list:
    """``n`` backends in local folders, each its own host (failure domain)."""
    out = []
    for i in range(1, n + 1):
        path = root / f"be{i}"
        path.mkdir(parents=True, exist_ok=True)
        out.append(catalog.backends.add(path.as_uri(), name=f"be{i}", **kwargs))
    return out


def replica_and_source(tmp_path: Path, size: int) -> tuple[Path, Path, Path, bytes]:
    """A backend root with one empty replica directory in it, and a source file of ``size``
    random bytes beside it: (root, replica, source, its bytes), for single-file copy tests."""
    root = tmp_path / "be2"
    replica = root / "default" / "orders_7" / "2026-11-01" / "v000001" / "b00003"
    replica.mkdir(parents=True)
    src = tmp_path / "src.bin"
    data = os.urandom(size)
    src.write_bytes(data)
    return root, replica, src, data


def tmp_area_files(root: Path) -> list[str]:
    """What the backend's tmp area (``_colocate/tmp``) holds: empty after every finished copy."""
    area = root / "_colocate" / "tmp"
    return os.listdir(area) if area.exists() else []


# Spark's Murmur3_x86_32 (org.apache.spark.unsafe.hash), for building bucket files without Spark.
# Checked against Spark's own ``hash()`` and write job in tests/balance/test_lake_writer_matches_spark.py.
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 = ((h1 ^ (h1 >> 16)) * 0x85EBCA6B) & _M32
    h1 = ((h1 ^ (h1 >> 13)) * 0xC2B2AE35) & _M32
    return h1 ^ (h1 >> 16)


def spark_hash_long(value: int, seed: int = 42) -> int:
    """``hash(bigint_col)`` in Spark SQL (``Murmur3_x86_32.hashLong``), as a signed 32-bit int."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _M32, _mix_k1(v & _M32))
    h1 = _fmix(_mix_h1(h1, _mix_k1(v >> 32)), 8)
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def spark_bucket(value: int, buckets: int) -> int:
    """``pmod(hash(value), buckets)`` for one bigint bucket column: the bucket seq Spark's bucketed
    write (and the write job's ``repartition``) gives a row with this key."""
    return spark_hash_long(value) % buckets
