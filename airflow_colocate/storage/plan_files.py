"""Plan and report files: where the contract (:mod:`airflow_colocate.core.contract`) meets a file system.

The contract only turns dataclasses into JSON and back; whether the file is local, on HDFS or in an
object store is this module's business, through :mod:`airflow_colocate.storage.fs`. A work dir such
as ``hdfs://nn:8020/colocate/work`` therefore stays a URI end to end: ``pathlib.Path`` would collapse
its ``//`` and write a local directory called ``hdfs:``.
"""

from __future__ import annotations

import os
from typing import TypeVar

from airflow_colocate.storage import fs

T = TypeVar("T")


def _uri(where: str | os.PathLike) -> str:
    return os.fspath(where)


def save_plan(obj, uri: str | os.PathLike) -> str:
    """Write ``obj.to_json()`` to ``uri`` atomically (a reader never sees half a plan) and return
    the URI to hand to the job."""
    uri = _uri(uri)
    fs.write_text_atomic(uri, obj.to_json())
    return uri


def load_plan(cls: type[T], uri: str | os.PathLike) -> T:
    """The ``cls`` instance in the JSON file at ``uri`` (a path, ``file://`` or another Hadoop-style URI)."""
    return cls.from_json(fs.read_text(_uri(uri)))


# A report is written by the job as a plan is by the control plane: same format, same atomic write.
save_report = save_plan
load_report = load_plan
