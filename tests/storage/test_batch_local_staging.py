"""A batch's local copy (``stage_file`` given the tmp area ``staging_area`` checked, as the clone job
calls it) opens its temporary file with one ``open(2)`` instead of a Python file object (issue 29:
thousands of clones a repair). It must be the general path's copy in every other respect: the same
bytes, checksum and tmp area, the same checks with the same messages, nothing left behind when it
fails anywhere, and the crash rule's steps (durable, then renamed) unchanged."""

from __future__ import annotations

import errno
import hashlib
import os

import pytest
from colocate_testing import replica_and_source, tmp_area_files

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import durability
from airflow_colocate.storage import fs

SIZES = {"empty": 0, "small": 40_000, "large": copy_mod.SMALL_COPY + 12_345}
NAME = "part-0.parquet"


def _stage(src, replica, root, expect, *, batch: bool):
    """Stage as the clone job does (``batch``: the tmp area checked first and passed) or as
    ``copy_file`` does (the root only: the general path through a file object)."""
    area = copy_mod.staging_area(root.as_uri(), replica.as_uri(), {}) if batch else None
    return copy_mod.stage_file(src.as_uri(), (replica / NAME).as_uri(), expect_sha256=expect,
                               root=root.as_uri(), area=area)


@pytest.fixture
def no_file_object(monkeypatch):
    """Fails a test if the batch path opens its temporary file through ``fs.open_write``."""
    monkeypatch.setattr(fs, "open_write", lambda uri: pytest.fail(f"a file object was opened for {uri}"))


@pytest.mark.parametrize("kind", SIZES)
def test_a_batch_copy_is_the_general_copy_without_a_file_object(tmp_path, monkeypatch, kind):
    root, replica, src, data = replica_and_source(tmp_path, SIZES[kind])
    want = hashlib.sha256(data).hexdigest()
    general = _stage(src, replica, root, want, batch=False)
    assert general.tmp.startswith("file:")
    os.remove(fs.local_path(general.tmp))
    opened = []
    real = fs.open_write
    monkeypatch.setattr(fs, "open_write", lambda uri: (opened.append(uri), real(uri))[1])
    staged = _stage(src, replica, root, want, batch=True)
    assert opened == []
    assert (staged.dst, staged.bytes, staged.sha256) == (general.dst, general.bytes, general.sha256) == (
        (replica / NAME).as_uri(), len(data), want)
    # an OS path in the backend's tmp area, named like the general path's (gc reads its start time)
    assert os.path.dirname(staged.tmp) == str(root / "_colocate" / "tmp")
    assert os.path.basename(staged.tmp).startswith(NAME + replica_dir.TMP_MARK)
    assert replica_dir.tmp_time(os.path.basename(staged.tmp)) is not None
    assert open(staged.tmp, "rb").read() == data and os.listdir(replica) == []  # nothing under the final name yet
    durability.make_durable([staged.tmp])
    copy_mod.publish(staged)
    assert (replica / NAME).read_bytes() == data and tmp_area_files(root) == []


def _error(fn) -> BaseException:
    with pytest.raises(ColocateError) as info:
        fn()
    return info.value


@pytest.mark.parametrize("kind", ["small", "large"])
def test_a_corrupt_source_gets_the_same_error_either_way_and_leaves_nothing(tmp_path, kind):
    root, replica, src, data = replica_and_source(tmp_path, SIZES[kind])
    want = hashlib.sha256(data).hexdigest()
    os.truncate(src, len(data) // 2)
    general = _error(lambda: _stage(src, replica, root, want, batch=False))
    batch = _error(lambda: _stage(src, replica, root, want, batch=True))
    assert type(batch) is type(general) is ColocateError
    assert str(batch) == str(general) and str(batch).startswith(f"checksum mismatch copying {src.as_uri()} ")
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


def test_bytes_changed_on_their_way_blame_the_destination_either_way(tmp_path, monkeypatch):
    """The source still hashes as recorded: a StagingError (retried), never a bad source."""
    root, replica, src, data = replica_and_source(tmp_path, SIZES["large"])
    real = os.copy_file_range

    def flipping(sfd, dfd, count, offset_src=None, offset_dst=None):
        n = real(sfd, dfd, count, offset_src, offset_dst)
        if n:
            os.pwrite(dfd, bytes([data[offset_dst] ^ 1]), offset_dst)
        return n

    monkeypatch.setattr(os, "copy_file_range", flipping)
    want = hashlib.sha256(data).hexdigest()
    general = _error(lambda: _stage(src, replica, root, want, batch=False))
    batch = _error(lambda: _stage(src, replica, root, want, batch=True))
    assert type(batch) is type(general) is copy_mod.StagingError and str(batch) == str(general)
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


def test_a_destination_holding_other_than_was_written_is_a_size_mismatch(tmp_path, monkeypatch, no_file_object):
    root, replica, src, data = replica_and_source(tmp_path, SIZES["small"])
    real = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((*real(fd)[:6], 7, *real(fd)[7:])))
    with pytest.raises(ColocateError, match=f"size mismatch copying {src.as_uri()} to .*: wrote {len(data)} bytes "
                                            f"but the destination holds 7; the copy was deleted"):
        _stage(src, replica, root, None, batch=True)
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


@pytest.mark.parametrize("kind", ["small", "large"])
def test_a_write_failing_in_the_middle_leaves_no_temporary_file(tmp_path, monkeypatch, no_file_object, kind):
    root, replica, src, data = replica_and_source(tmp_path, SIZES[kind])
    real_pwrite = os.pwrite
    writes = []

    def full(fd, chunk, offset):  # the disk fills after the first part
        if writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        writes.append(offset)
        return real_pwrite(fd, memoryview(chunk)[:1000], offset)

    def refusing(*args):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))  # the large file through the buffer too

    monkeypatch.setattr(os, "pwrite", full)
    monkeypatch.setattr(os, "copy_file_range", refusing)
    with pytest.raises(OSError) as info:
        _stage(src, replica, root, hashlib.sha256(data).hexdigest(), batch=True)
    assert info.value.errno == errno.ENOSPC and writes
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


def test_a_short_write_is_continued(tmp_path, monkeypatch, no_file_object):
    root, replica, src, data = replica_and_source(tmp_path, SIZES["small"])
    real_pwrite = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, chunk, offset: real_pwrite(fd, memoryview(chunk)[:4096], offset))
    staged = _stage(src, replica, root, hashlib.sha256(data).hexdigest(), batch=True)
    assert staged.bytes == len(data) and open(staged.tmp, "rb").read() == data


def test_a_tmp_area_gone_since_it_was_checked_fails_and_creates_nothing(tmp_path, no_file_object):
    root, replica, src, data = replica_and_source(tmp_path, SIZES["small"])
    area = copy_mod.staging_area(root.as_uri(), replica.as_uri(), {})
    os.rmdir(fs.local_path(area))
    with pytest.raises(FileNotFoundError):
        copy_mod.stage_file(src.as_uri(), (replica / NAME).as_uri(), root=root.as_uri(), area=area)
    assert not os.path.exists(fs.local_path(area)) and os.listdir(replica) == []


def test_fsync_or_a_remote_end_keeps_the_general_path(tmp_path, monkeypatch):
    """``copy_file`` (fsync: one file on its own) and an object store's end go through a stream."""
    root, replica, src, data = replica_and_source(tmp_path, SIZES["small"])
    opened = []
    real = fs.open_write
    monkeypatch.setattr(fs, "open_write", lambda uri: (opened.append(uri), real(uri))[1])
    area = copy_mod.staging_area(root.as_uri(), replica.as_uri(), {})
    staged = copy_mod.stage_file(src.as_uri(), (replica / NAME).as_uri(), root=root.as_uri(), area=area, fsync=True)
    assert opened == [staged.tmp] and staged.tmp.startswith("file:")
    assert copy_mod.copy_file(src.as_uri(), (replica / "b.parquet").as_uri(), root=root.as_uri())[0] == len(data)
    assert len(opened) == 2


@pytest.mark.parametrize("path", ["/a/b/c", "/a/b/c/", "/a//b/c", "/a/./b", "/a/b/../c", "/a/.hidden/c", "a/b",
                                  "./a", "/", "//a/b"])
def test_device_of_a_path_is_that_of_its_absolute_path(tmp_path, monkeypatch, path):
    """fs._device skips ``abspath`` only for a path that is already its own ``abspath``."""
    monkeypatch.chdir(tmp_path)
    seen = []
    real = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (seen.append(p), real(p, *a, **k))[1])
    fs._device(path)
    assert seen[0] == os.path.abspath(path)
