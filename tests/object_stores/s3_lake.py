"""The balance tests' lake on a real S3 API (a helper module for tests and bench/bench_s3_repair.py)."""

from __future__ import annotations

import itertools
import os

import pyarrow.parquet as pq
from balance_lake import Lake

from airflow_colocate.jobs.backends import add_backend
from airflow_colocate.storage import copy as copy_mod

_bucket_names = itertools.count(1)


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

    def etags(self, path: str) -> dict[str, str]:
        """As the write job records them: from the listing right after the proven copies."""
        from airflow_colocate.storage import s3

        return {n: e for n, (_, e) in s3.list_etags(path).items()} if s3.is_s3(path) else {}


class HdfsLake(S3Lake):
    """The same lake with each backend a folder of one HDFS namespace (made first: HDFS has
    directories, and a backend's root must exist before it is added)."""

    namenode = None

    def backend_root(self, name: str) -> str:
        from airflow_colocate.storage import fs

        root = f"{self.namenode}/lake-{os.getpid()}-{next(_bucket_names)}/{name}"
        fs.makedirs(root)
        return root
