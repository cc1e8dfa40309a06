"""The URI file-system seam on file:// (other schemes go through pyarrow and are not tested here)."""

from __future__ import annotations

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import fs


def test_local_paths():
    assert fs.local_path("file:///a/b%20c") == "/a/b c"
    assert fs.local_path("file:/a/b") == "/a/b"
    assert fs.local_path("/a/b") == "/a/b"
    assert fs.is_local("file:///x") and fs.is_local("/x") and not fs.is_local("s3a://b/x")
    with pytest.raises(ColocateError):
        fs.local_path("file://otherhost/a")


def test_basic_operations(tmp_path):
    root = (tmp_path / "r").as_uri()
    assert not fs.exists(root)
    fs.makedirs(fs.join(root, "d/e"))
    assert fs.exists(root) and fs.is_dir(fs.join(root, "d"))
    with fs.open_write(fs.join(root, "d/f1")) as f:
        f.write(b"12345")
    with fs.open_write(fs.join(root, "d/f0")) as f:
        f.write(b"1")
    assert fs.list_files(fs.join(root, "d")) == [("f0", 1), ("f1", 5)]  # files only, sorted
    assert fs.size(fs.join(root, "d/f1")) == 5
    with fs.open_read(fs.join(root, "d/f1")) as f:
        assert f.read() == b"12345"
    assert fs.list_files(fs.join(root, "nope"), missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        fs.list_files(fs.join(root, "nope"))

    assert fs.can_rename(fs.join(root, "d/f1"), fs.join(root, "d/e/g"))
    fs.rename(fs.join(root, "d/f1"), fs.join(root, "d/e/g"))
    assert fs.read_text(fs.join(root, "d/e/g")) == "12345" and not fs.exists(fs.join(root, "d/f1"))

    fs.write_text_atomic(fs.join(root, "new/report.json"), "{}")
    assert fs.read_text(fs.join(root, "new/report.json")) == "{}"
    assert [n for n, _ in fs.list_files(fs.join(root, "new"))] == ["report.json"]

    fs.delete_tree(fs.join(root, "d"))
    assert not fs.exists(fs.join(root, "d"))
    fs.delete_tree(fs.join(root, "d"))  # missing is fine
    fs.delete_file(fs.join(root, "nothing"))


def test_can_rename_across_schemes_is_false(tmp_path):
    assert not fs.can_rename((tmp_path / "a").as_uri(), "s3a://bucket/a")
    assert fs.can_rename("hdfs://nn:8020/a", "hdfs://nn:8020/b")
    assert not fs.can_rename("hdfs://nn:8020/a", "hdfs://other:8020/b")
    # an object store's rename is a copy and a delete, never atomic: copies go to their final keys there
    assert not fs.can_rename("s3a://bucket/a", "s3://bucket/b")
    assert not fs.can_rename("s3a://bucket/a", "s3a://other/b")
    with pytest.raises(ColocateError, match="not on the same file system"):
        fs.rename((tmp_path / "a").as_uri(), "s3a://bucket/a")


def test_unknown_scheme_is_a_clear_error():
    with pytest.raises(ColocateError, match="cannot open a file system for nosuch://x"):
        fs.exists("nosuch://x/y")
