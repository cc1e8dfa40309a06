"""Fixtures for the object-store tests: one real S3 API (SeaweedFS, tests/s3server.py) for the run,
and a lake whose backends are buckets on it.

The S3 server's address and key reach the product the way they reach it in a deployment: the AWS
SDKs' standard environment variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, …), which
pyarrow, boto3 and hadoop-aws all read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "balance"))  # the lake of the balance tests

from balance_lake import Clock  # noqa: E402
from s3_lake import S3Lake  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    from s3server import start_s3

    server = start_s3(tmp_path_factory.mktemp("s3"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The S3 server's address and key in this process's environment, for one test."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    return s3_server.env()


def _lake(cls, tmp_path, **where):
    """A lake of class ``cls`` on a fresh SQLite catalog, ``where`` its store, with be1..be3."""
    clock = Clock()
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
    cat.init()
    lake = cls(cat, clock, tmp_path)
    for key, value in where.items():
        setattr(lake, key, value)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    return lake


@pytest.fixture
def s3_lake(tmp_path, s3_server, s3_env):
    lake = _lake(S3Lake, tmp_path, server=s3_server)
    yield lake
    lake.catalog.dispose()


@pytest.fixture(scope="session")
def hdfs_server(tmp_path_factory):
    from hdfsserver import start_hdfs

    server = start_hdfs(tmp_path_factory.mktemp("hdfs"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hdfs_lake(tmp_path, hdfs_server):
    """The balance tests' lake with its backends in folders of the MiniDFSCluster (one namespace;
    what a backend is on HDFS: docs/operations.md, "Backends on HDFS")."""
    from s3_lake import HdfsLake

    lake = _lake(HdfsLake, tmp_path, namenode=hdfs_server.uri)
    yield lake
    lake.catalog.dispose()
