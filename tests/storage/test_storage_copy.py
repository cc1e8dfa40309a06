"""The shared copy primitive: checksums, tmp-then-rename, replica checksums, hard-link carry-over."""

from __future__ import annotations

import hashlib
import os

import pytest

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs
from airflow_colocate.storage.copy import copy_file, copy_replica, sha256_file
from airflow_colocate.storage.replica_dir import replica_checksum


def test_copy_file_returns_size_and_checksum(tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    src = tmp_path / "a.bin"
    src.write_bytes(data)
    n, digest = copy_file(src.as_uri(), (tmp_path / "b.bin").as_uri())
    assert n == len(data)
    assert digest == hashlib.sha256(data).hexdigest() == sha256_file((tmp_path / "b.bin").as_uri())
    assert (tmp_path / "b.bin").read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "b.bin"]  # no temporary file left


def test_copy_file_streams_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(copy_mod, "CHUNK", 1000)
    data = os.urandom(10_500)
    (tmp_path / "a").write_bytes(data)
    n, digest = copy_file(str(tmp_path / "a"), str(tmp_path / "b"))  # bare paths work too
    assert (n, digest) == (len(data), hashlib.sha256(data).hexdigest())


def test_copy_file_verifies_expected_checksum(tmp_path):
    (tmp_path / "a").write_bytes(b"hello")
    good = hashlib.sha256(b"hello").hexdigest()
    assert copy_file((tmp_path / "a").as_uri(), (tmp_path / "b").as_uri(), expect_sha256=good)[1] == good
    with pytest.raises(ColocateError) as err:
        copy_file((tmp_path / "a").as_uri(), (tmp_path / "c").as_uri(), expect_sha256="0" * 64)
    message = str(err.value)
    assert "a" in message and "c" in message and good in message and "0" * 64 in message
    assert not (tmp_path / "c").exists()
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_failure_mid_copy_leaves_no_destination(tmp_path, monkeypatch):
    (tmp_path / "a").write_bytes(os.urandom(5000))
    monkeypatch.setattr(copy_mod, "CHUNK", 1000)
    real_open_write = fs.open_write

    class Exploding:
        def __init__(self, f):
            self.f, self.calls = f, 0

        def write(self, chunk):
            self.calls += 1
            if self.calls == 3:
                raise OSError("disk on fire")
            return self.f.write(chunk)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(fs, "open_write", lambda uri: Exploding(real_open_write(uri)))
    with pytest.raises(OSError, match="disk on fire"):
        copy_file((tmp_path / "a").as_uri(), (tmp_path / "b").as_uri())
    assert sorted(os.listdir(tmp_path)) == ["a"]  # neither b nor b.tmp-…


def test_an_existing_destination_is_replaced_whole(tmp_path):
    (tmp_path / "a").write_bytes(b"new")
    (tmp_path / "b").write_bytes(b"old and longer")
    copy_file((tmp_path / "a").as_uri(), (tmp_path / "b").as_uri())
    assert (tmp_path / "b").read_bytes() == b"new"


def test_replica_checksum_is_order_independent():
    files = [("part-1", "aa"), ("part-0", "bb"), ("part-2", "cc")]
    assert replica_checksum(files) == replica_checksum(list(reversed(files))) == replica_checksum(sorted(files))
    expected = hashlib.sha256(b"part-0:bb\npart-1:aa\npart-2:cc\n").hexdigest()
    assert replica_checksum(files) == expected
    assert replica_checksum(files) != replica_checksum([("part-1", "aa"), ("part-0", "bb")])
    assert replica_checksum(files) != replica_checksum([("part-1", "bb"), ("part-0", "aa"), ("part-2", "cc")])


def _replica(path, files: dict[str, bytes]):
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    return path.as_uri()


def test_copy_replica_copies_and_reports(tmp_path):
    src = _replica(tmp_path / "src", {"p1": b"one", "p0": b"zero"})
    files, total = copy_replica(src, (tmp_path / "dst").as_uri())
    assert files == [("p0", hashlib.sha256(b"zero").hexdigest()), ("p1", hashlib.sha256(b"one").hexdigest())]
    assert total == 7
    assert sorted(os.listdir(tmp_path / "dst")) == ["p0", "p1"]
    assert os.stat(tmp_path / "dst" / "p0").st_ino != os.stat(tmp_path / "src" / "p0").st_ino  # a real copy


def test_copy_replica_refuses_a_source_with_unknown_files(tmp_path):
    """A temporary or hidden file in a replica directory is no part of the replica, and Spark would
    read a temporary one: it is an unknown file, never silently skipped (nor copied)."""
    src = _replica(tmp_path / "src", {"p1": b"one", "p0": b"zero", ".p0.crc": b"x", "p2.tmp-abc": b"half"})
    with pytest.raises(ColocateError, match=r"holds files that are no part of it: \.p0\.crc, p2\.tmp-abc"):
        copy_replica(src, (tmp_path / "dst").as_uri())
    assert not (tmp_path / "dst").exists()
    assert replica_dir.replica_files(src) == [(".p0.crc", 1), ("p0", 4), ("p1", 3), ("p2.tmp-abc", 4)]


def test_copy_replica_checks_expected_files(tmp_path):
    src = _replica(tmp_path / "src", {"p0": b"zero"})
    with pytest.raises(ColocateError, match="does not hold the expected files"):
        copy_replica(src, (tmp_path / "d1").as_uri(), expect={"p0": "x", "p1": "y"})
    with pytest.raises(ColocateError, match="checksum mismatch"):
        copy_replica(src, (tmp_path / "d2").as_uri(), expect={"p0": "0" * 64})
    assert not (tmp_path / "d2" / "p0").exists()
    files, _ = copy_replica(src, (tmp_path / "d3").as_uri(), expect={"p0": hashlib.sha256(b"zero").hexdigest()})
    assert [n for n, _ in files] == ["p0"]


def test_copy_replica_links_on_one_device(tmp_path):
    src = _replica(tmp_path / "base", {"p0": b"zero"})
    files, total = copy_replica(src, (tmp_path / "new").as_uri(), link=True)
    assert total == 4 and files[0][1] == hashlib.sha256(b"zero").hexdigest()
    assert os.stat(tmp_path / "new" / "p0").st_ino == os.stat(tmp_path / "base" / "p0").st_ino


def test_copy_replica_of_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    assert copy_replica((tmp_path / "empty").as_uri(), (tmp_path / "out").as_uri()) == ([], 0)
    assert (tmp_path / "out").is_dir()


def test_copy_replica_of_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ColocateError, match="replica directory .*gone does not exist"):
        copy_replica((tmp_path / "gone").as_uri(), (tmp_path / "out").as_uri())
