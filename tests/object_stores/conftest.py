"""Fixtures for the object-store tests: one real S3 API (SeaweedFS, tests/s3server.py) for the run,
and a lake whose backends are buckets on it.

The S3 server's address and key reach the product the way they reach it in a deployment: the AWS
SDKs' standard environment variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, …), which
pyarrow, boto3 and hadoop-aws all read."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "balance"))  # the lake of the balance tests

from balance_lake import Clock, Lake  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.jobs.backends import add_backend  # noqa: E402
from airflow_colocate.storage import copy as copy_mod  # noqa: E402

_bucket_names = itertools.count(1)


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


class S3Lake(Lake):
    """The balance tests' lake with each backend under a prefix of one bucket on the S3 server
    (SeaweedFS gives each bucket volumes of its own: a bucket per backend would fill its disk
    allowance in a few tests), added as a user adds one: with its identity marker."""

    server = None
    bucket = None

    def backend_root(self, name: str) -> str:
        if self.bucket is None:
            self.bucket = self.server.make_bucket(f"lake-{os.getpid()}-{next(_bucket_names)}")
        return f"s3a://{self.bucket}/{name}"

    def put(self, data, uri: str) -> None:
        """As the write job places a bucket file: copied from its staged file with its checksum."""
        staged = self.root / "staged.parquet"
        pq.write_table(data, staged)
        copy_mod.copy_file(staged.as_uri(), uri)
        staged.unlink()

    def add_backend(self, name: str, **kwargs):
        b = add_backend(self.catalog, self.backend_root(name), name=name, **kwargs)
        self.names[name] = b.id
        return b


@pytest.fixture
def s3_lake(tmp_path, s3_server, s3_env):
    clock = Clock()
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
    cat.init()
    lake = S3Lake(cat, clock, tmp_path)
    lake.server = s3_server
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    yield lake
    cat.dispose()
