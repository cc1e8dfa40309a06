"""Plan and report files go through the URI seam: a path, a ``file://`` URI and a Hadoop-style URI
all reach the same bytes, and a scheme nothing can open is refused by name."""

from __future__ import annotations

import pytest
from pyarrow import fs as pafs

from airflow_colocate.core.contract import ReplicaReport, Source, WritePlan, WriteReport
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import fs
from airflow_colocate.storage.plan_files import load_plan, load_report, save_plan, save_report


def a_plan(report_uri: str) -> WritePlan:
    return WritePlan(job_id="w1", table="db.t", columns=[["k", "bigint"]], dist_cols=["k"], partition_cols=[],
                     partition_value="all", bucket_num=1, mode="overwrite", version=1,
                     source=Source(format="parquet", path="/src"), buckets=[], staging_uri="/staging",
                     report_uri=report_uri)


def a_report() -> WriteReport:
    replica = ReplicaReport(bucket_seq=0, backend_id=1, path="file:///be1/t/b00000", files=["p.parquet"], rows=3,
                            bytes=10, checksum="c", sizes={"p.parquet": 10})
    return WriteReport(job_id="w1", table="db.t", partition_value="all", version=1, source_rows=3,
                       replicas=[replica], seconds=0.5, spark_version="4")


def test_a_file_uri_round_trips_and_leaves_no_temporary_file(tmp_path):
    uri = (tmp_path / "work" / "w1" / "plan.json").as_uri()
    plan = a_plan(fs.join((tmp_path / "work" / "w1").as_uri(), "report.json"))
    assert save_plan(plan, uri) == uri
    assert load_plan(WritePlan, uri) == plan
    assert [n for n, _ in fs.list_files(fs.parent(uri))] == ["plan.json"]


def test_a_plain_path_or_pathlike_round_trips(tmp_path):
    report = a_report()
    path = tmp_path / "w1" / "report.json"
    assert save_report(report, path) == str(path)
    assert load_report(WriteReport, str(path)) == report
    assert load_report(WriteReport, path.as_uri()) == report  # the same file, named as a URI


def test_an_hdfs_work_dir_is_not_mangled_into_a_local_path(tmp_path, monkeypatch):
    """``Path("hdfs://nn:8020/w")`` is ``hdfs:/nn:8020/w``; the file must land at ``/w`` on the name node."""
    namenode = tmp_path / "namenode"
    namenode.mkdir()
    opened = []

    def arrow_fs(scheme, netloc):
        opened.append((scheme, netloc))
        return pafs.SubTreeFileSystem(str(namenode), pafs.LocalFileSystem())

    monkeypatch.setattr(fs, "_arrow_fs", arrow_fs)
    monkeypatch.chdir(tmp_path)
    uri = "hdfs://nn:8020/colocate/work/w1/plan.json"
    plan = a_plan("hdfs://nn:8020/colocate/work/w1/report.json")
    assert save_plan(plan, uri) == uri
    assert (namenode / "colocate" / "work" / "w1" / "plan.json").is_file()
    assert not (tmp_path / "hdfs:").exists()
    assert load_plan(WritePlan, uri) == plan
    assert set(opened) == {("hdfs", "nn:8020")}


def test_a_scheme_without_a_file_system_is_refused_by_name(tmp_path):
    with pytest.raises(ColocateError, match="cannot open a file system for nosuch://bucket"):
        save_plan(a_plan("nosuch://bucket/w1/report.json"), "nosuch://bucket/w1/plan.json")
    with pytest.raises(ColocateError, match="cannot open a file system for nosuch://bucket"):
        load_report(WriteReport, "nosuch://bucket/w1/report.json")
