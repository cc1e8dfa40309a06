"""The one copy primitive that the write job and the clone (balance/repair) job share.

A copy streams in 8 MiB chunks and hashes while it reads, writes to ``dst + '.tmp-<random>'``,
syncs, checks the size, and only then renames to ``dst``: a half copy is never visible under the
final name. A replica's checksum is a sha256 over its sorted ``name:sha256`` lines, so two
byte-identical replicas have the same checksum wherever they live.
"""

from __future__ import annotations

import hashlib
import os

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import fs

CHUNK = 8 * 1024 * 1024
TMP_MARK = ".tmp-"


def is_tmp_name(name: str) -> bool:
    return TMP_MARK in name


def _tmp_uri(dst_uri: str) -> str:
    return f"{dst_uri}{TMP_MARK}{os.urandom(6).hex()}"


def sha256_file(uri: str) -> str:
    h = hashlib.sha256()
    with fs.open_read(uri) as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def copy_file(src_uri: str, dst_uri: str, *, expect_sha256: str | None = None) -> tuple[int, str]:
    """Copy one file; returns (bytes, sha256 hex) of what was written.

    With ``expect_sha256``, a copy whose bytes hash differently is deleted and a
    :class:`ColocateError` names both ends and both checksums.
    """
    tmp = _tmp_uri(dst_uri)
    h = hashlib.sha256()
    written = 0
    try:
        with fs.open_read(src_uri) as src, fs.open_write(tmp) as dst:
            while chunk := src.read(CHUNK):
                h.update(chunk)
                dst.write(chunk)
                written += len(chunk)
            if hasattr(dst, "fileno"):
                dst.flush()
                os.fsync(dst.fileno())
        digest = h.hexdigest()
        if expect_sha256 is not None and digest != expect_sha256:
            raise ColocateError(
                f"checksum mismatch copying {src_uri} to {dst_uri}: expected sha256 {expect_sha256}, "
                f"got {digest}; the copy was deleted"
            )
        on_disk = fs.size(tmp)
        if on_disk != written:
            raise ColocateError(
                f"size mismatch copying {src_uri} to {dst_uri}: wrote {written} bytes but the destination "
                f"holds {on_disk}; the copy was deleted"
            )
        fs.rename(tmp, dst_uri)  # a sibling: always the same file system
    except BaseException:
        fs.delete_file(tmp)
        raise
    return written, digest


def link_or_copy(src_uri: str, dst_uri: str) -> tuple[int, str]:
    """Hard-link ``src`` to ``dst`` when both are on one local device, else :func:`copy_file`.

    Returns (bytes, sha256); the checksum of a link is read from the (shared) bytes.
    """
    if fs.same_device(src_uri, dst_uri):
        tmp = _tmp_uri(dst_uri)
        try:
            os.link(fs.local_path(src_uri), fs.local_path(tmp))
            os.replace(fs.local_path(tmp), fs.local_path(dst_uri))
        except OSError:
            fs.delete_file(tmp)  # e.g. a file system without hard links: copy below
        else:
            return fs.size(dst_uri), sha256_file(dst_uri)
    return copy_file(src_uri, dst_uri)


def replica_checksum(files: list[tuple[str, str]]) -> str:
    """sha256 over the sorted ``name:sha256\\n`` lines: equal for byte-identical replicas."""
    h = hashlib.sha256()
    for name, digest in sorted(files):
        h.update(f"{name}:{digest}\n".encode("utf-8"))
    return h.hexdigest()


def replica_files(dir_uri: str) -> list[tuple[str, int]]:
    """(name, size) of the data files of one replica directory (no temporary or hidden files)."""
    return [
        (name, size)
        for name, size in fs.list_files(dir_uri)
        if not is_tmp_name(name) and not name.startswith((".", "_"))
    ]


def copy_replica(
    src_dir: str,
    dst_dir: str,
    *,
    expect: dict[str, str] | None = None,
    link: bool = False,
) -> tuple[list[tuple[str, str]], int]:
    """Copy every data file of one replica directory into ``dst_dir`` (created if missing).

    Returns ([(name, sha256), ...] sorted by name, total bytes). ``expect`` maps file names to the
    sha256 each must have (a clone from a reported replica); the set of names must match too.
    ``link=True`` hard-links instead of copying when both directories are on one local device (the
    carry-over of base files on append: the files are immutable, so sharing the inode is safe).
    """
    try:
        names = replica_files(src_dir)
    except FileNotFoundError:
        raise ColocateError(f"replica directory {src_dir} does not exist") from None
    if expect is not None and sorted(expect) != [n for n, _ in names]:
        raise ColocateError(
            f"replica {src_dir} does not hold the expected files: has {[n for n, _ in names]}, "
            f"expected {sorted(expect)}"
        )
    fs.makedirs(dst_dir)
    out: list[tuple[str, str]] = []
    total = 0
    for name, _ in names:
        src, dst = fs.join(src_dir, name), fs.join(dst_dir, name)
        want = None if expect is None else expect[name]
        if link:
            n, digest = link_or_copy(src, dst)
            if want is not None and digest != want:
                fs.delete_file(dst)
                raise ColocateError(
                    f"checksum mismatch carrying {src} to {dst}: expected sha256 {want}, got {digest}; "
                    f"the copy was deleted"
                )
        else:
            n, digest = copy_file(src, dst, expect_sha256=want)
        out.append((name, digest))
        total += n
    return out, total
