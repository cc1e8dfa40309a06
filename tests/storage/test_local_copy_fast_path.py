"""A local staged copy goes through raw descriptors (issue 29: a repair's thousands of clones): one
``pread`` hashed and written for a small file, ``copy_file_range`` then a hash of the destination
for a large one. The checksum is of the bytes the destination holds, so a copy that went wrong
(the source truncated under it, a byte that landed differently) is caught against the catalog's
checksum and leaves no temporary file; without ``copy_file_range`` the copy goes through a buffer."""

from __future__ import annotations

import errno
import hashlib
import os

import pytest
from colocate_testing import replica_and_source, tmp_area_files

from airflow_colocate.core.contract import CloneTask
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark.clone_job import clone_task
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import durability
from airflow_colocate.storage import layout

SIZES = {"small": 40_000, "large": copy_mod.SMALL_COPY + 12_345}


def _stage(src, replica, root, expect):
    staged = copy_mod.stage_file(src.as_uri(), (replica / "part-0.parquet").as_uri(), expect_sha256=expect,
                                 root=root.as_uri())
    durability.make_durable([staged.tmp])
    copy_mod.publish(staged)
    return staged


@pytest.mark.parametrize("kind", SIZES)
def test_a_local_copy_is_exact_and_checked(tmp_path, kind):
    root, replica, src, data = replica_and_source(tmp_path, SIZES[kind])
    calls = []
    real = os.copy_file_range
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "copy_file_range", lambda *a: (calls.append(a[2]), real(*a))[1])
        staged = _stage(src, replica, root, hashlib.sha256(data).hexdigest())
    assert (staged.bytes, staged.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert (replica / "part-0.parquet").read_bytes() == data
    assert tmp_area_files(root) == []
    assert bool(calls) == (kind == "large")  # the kernel copies the large file, the small one is one read


@pytest.mark.parametrize("kind", SIZES)
def test_a_source_whose_bytes_differ_from_the_recorded_checksum_leaves_nothing(tmp_path, kind):
    """The source on disk is shorter than what the catalog recorded (truncated): its checksum
    differs, the copy is refused and its temporary file removed."""
    root, replica, src, data = replica_and_source(tmp_path, SIZES[kind])
    os.truncate(src, len(data) // 2)
    with pytest.raises(ColocateError, match=r"checksum mismatch copying .*src\.bin .*: expected sha256 "
                                            + hashlib.sha256(data).hexdigest()):
        _stage(src, replica, root, hashlib.sha256(data).hexdigest())
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


def test_a_source_truncated_while_the_kernel_copies_it_is_caught(tmp_path, monkeypatch):
    root, replica, src, data = replica_and_source(tmp_path, SIZES["large"])
    real = os.copy_file_range

    def truncating(sfd, dfd, count, offset_src=None, offset_dst=None):
        if offset_src == 0:  # the first part arrives, then the source is cut short under the copy
            n = real(sfd, dfd, 256 * 1024, offset_src, offset_dst)
            os.truncate(src, 256 * 1024)
            return n
        return real(sfd, dfd, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "copy_file_range", truncating)
    with pytest.raises(ColocateError, match="checksum mismatch"):
        _stage(src, replica, root, hashlib.sha256(data).hexdigest())
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


def test_the_checksum_is_of_the_bytes_the_destination_holds(tmp_path, monkeypatch):
    """A byte that lands differently in the destination than it was in the source (simulated
    after the kernel's copy) fails the check: the hash is taken where the bytes landed."""
    root, replica, src, data = replica_and_source(tmp_path, SIZES["large"])
    real = os.copy_file_range

    def flipping(sfd, dfd, count, offset_src=None, offset_dst=None):
        n = real(sfd, dfd, count, offset_src, offset_dst)
        if n:
            os.pwrite(dfd, bytes([data[offset_dst] ^ 1]), offset_dst)
        return n

    monkeypatch.setattr(os, "copy_file_range", flipping)
    # the source still hashes right: the destination is blamed (retried later), never the source
    with pytest.raises(copy_mod.StagingError, match="changed the bytes, not the source; the copy was deleted"):
        _stage(src, replica, root, hashlib.sha256(data).hexdigest())
    assert tmp_area_files(root) == [] and os.listdir(replica) == []


def test_a_short_read_of_a_small_file_is_read_to_its_end(tmp_path, monkeypatch):
    """Some mounts (FUSE, CIFS, 9p) answer a read with fewer bytes than asked before the end: the
    copy reads on to the end instead of taking a short copy for a corrupt source."""
    root, replica, src, data = replica_and_source(tmp_path, SIZES["small"])
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, off: real(fd, min(n, 4096), off))
    staged = _stage(src, replica, root, hashlib.sha256(data).hexdigest())
    assert staged.bytes == len(data) and (replica / "part-0.parquet").read_bytes() == data


@pytest.mark.parametrize("answer", ["EXDEV", "ENOSYS", "copies nothing"])
def test_without_copy_file_range_the_copy_goes_through_a_buffer(tmp_path, monkeypatch, answer):
    root, replica, src, data = replica_and_source(tmp_path, SIZES["large"])
    monkeypatch.setattr(copy_mod, "CHUNK", 100_000)  # several reads

    def refusing(*args):
        if answer == "copies nothing":
            return 0
        raise OSError(getattr(errno, answer), os.strerror(getattr(errno, answer)))

    monkeypatch.setattr(os, "copy_file_range", refusing)
    staged = _stage(src, replica, root, hashlib.sha256(data).hexdigest())
    assert staged.bytes == len(data)
    assert (replica / "part-0.parquet").read_bytes() == data
    assert tmp_area_files(root) == []


def test_a_clone_whose_source_is_truncated_under_it_marks_the_source_bad_and_leaves_nothing(tmp_path, monkeypatch):
    """The clone job's side: the listing saw the recorded size, the copy then read a shorter file."""
    src_root, dst_root = tmp_path / "be1", tmp_path / "be2"
    src_dir = layout.replica_dir(src_root.as_uri(), "default", "orders", 7, "2026-11-01", 1, 3)
    dst_dir = layout.replica_dir(dst_root.as_uri(), "default", "orders", 7, "2026-11-01", 1, 3)
    name = layout.bucket_file_name("w1", 3)
    path = src_root / "default" / "orders_7" / "2026-11-01" / "v000001" / "b00003"
    path.mkdir(parents=True)
    dst_root.mkdir()
    data = os.urandom(SIZES["large"])
    (path / name).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    task = CloneTask(key="1:1:3:2", table="default.orders", partition_id=1, partition="2026-11-01", version=1,
                     bucket_seq=3, backend_id=2, src_backend_id=1, src=src_dir, dst=dst_dir,
                     checksum=replica_dir.replica_checksum([(name, digest)]), bytes=len(data), rows=10,
                     files={name: digest}, sizes={name: len(data)}, root=dst_root.as_uri())
    real = os.copy_file_range

    def truncating(sfd, dfd, count, offset_src=None, offset_dst=None):
        n = real(sfd, dfd, min(count, 4096), offset_src, offset_dst)
        os.truncate(path / name, 4096)
        return n

    monkeypatch.setattr(os, "copy_file_range", truncating)
    result = clone_task(dict(vars(task)))
    assert result["ok"] is False and result["source_bad"] is True
    assert "checksum mismatch" in result["error"] and digest in result["error"]
    assert tmp_area_files(dst_root) == []
    assert os.listdir(dst_root / "default" / "orders_7" / "2026-11-01" / "v000001" / "b00003") == []
