"""When copied bytes and names are durable: ``syncfs`` per file system through descriptors opened
before the first write (so a write-back error of their pages is reported), else an ``fsync`` per
file; and the write-back a large staged file starts as soon as it is written.

A batch of copies is made durable at once, before any of them gets its final name, and the names
after: the crash rule of every copy that the clone job and the write job make
(``storage/copy.py``), paid once per batch instead of once per file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
import time
from collections.abc import Iterable

from airflow_colocate.storage import fs


def _load_syncfs():
    """libc's ``syncfs(2)`` (Linux), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return fn


_SYNCFS = _load_syncfs()


def _load_sync_file_range():
    """libc's ``sync_file_range(2)`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint], ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _load_sync_file_range()


# A staged file at least this large starts its write-back as soon as it is written: the disk
# writes it while the batch's other files are copied, instead of all at once in the batch's syncfs
# (the kernel itself would wait for gigabytes of dirty pages or 30 s). Not the small files: with
# the copies through raw descriptors, starting a 40 KiB file's write-back (block allocation, one
# request) cost more of the copying process's CPU per file than its copy, and gained no wall time
# (bench/bench_repair.py, interleaved); the kernel's flusher writes them. The large files hold
# most of the bytes: theirs starts.
WRITEBACK_MIN = 1 << 20
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int) -> None:
    """Start writing ``fd``'s dirty pages to disk without waiting (``sync_file_range`` with
    ``SYNC_FILE_RANGE_WRITE``). It makes nothing durable (no metadata, no disk cache flush): the
    batch's :func:`make_durable` still does; it only moves the disk's work earlier."""
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_DURABLE_LOCK = threading.Lock()
_DURABLE = [0.0, 0]  # seconds spent in make_durable, calls: this process's, for the benches' figures


def durable_totals() -> tuple[float, int]:
    """(seconds, calls) this process has spent in :func:`make_durable` so far: a clone worker
    process reports the difference, so a bench sees the ``syncfs`` waits of every process."""
    with _DURABLE_LOCK:
        return _DURABLE[0], _DURABLE[1]


def watch_durability(roots: Iterable[str | None]) -> dict[int, int]:
    """File descriptors on the file systems a batch is about to write, opened before its first write
    (device -> fd), for :func:`make_durable` to ``syncfs`` through.

    ``syncfs`` reports a write-back error only if it happened after the descriptor it is given was
    opened (Linux 5.8+, errseq), and reports it once per descriptor. A descriptor opened only at the
    end would miss an error that hit this batch's pages before that: one the other half of the
    partition's ``syncfs``, another worker, or the kernel's own write-back saw first. Then bytes
    that never reached the disk would be published and registered. With the descriptor opened
    first, the worst case is a batch failed for another batch's error, which is safe (retried)."""
    fds: dict[int, int] = {}
    for root in dict.fromkeys(r for r in roots if r):
        if _SYNCFS is None or not fs.is_local(root):
            continue
        try:
            fd = os.open(fs.local_path(root), os.O_RDONLY)
        except OSError:  # not there (yet): make_durable opens one at the end, as before
            continue
        dev = os.fstat(fd).st_dev
        if dev in fds:
            os.close(fd)
        else:
            fds[dev] = fd
    return fds


def close_watch(fds: dict[int, int]) -> None:
    for fd in fds.values():
        os.close(fd)


def make_durable(uris: Iterable[str], watch: dict[int, int] | None = None) -> None:
    """Make the bytes of these files, and these directories' entries, durable, in one pass.

    Local paths: one ``syncfs(2)`` per file system they are on (Linux; it writes back every dirty
    page and inode of that file system and, since Linux 5.8, reports a write-back error), which is
    what ``cp -a`` + ``sync`` pays once at the end; elsewhere an ``fsync`` of each. Other schemes
    (HDFS, object stores) are durable when the stream is closed. Raises ``OSError`` when the disk
    could not write: the caller must then not publish or register anything it staged."""
    started = time.perf_counter()
    try:
        _make_durable(uris, watch or {})
    finally:
        with _DURABLE_LOCK:
            _DURABLE[0] += time.perf_counter() - started
            _DURABLE[1] += 1


def _make_durable(uris: Iterable[str], watch: dict[int, int]) -> None:
    local = [fs.local_path(u) for u in uris if fs.is_local(u)]
    if not local:
        return
    if _SYNCFS is None:
        for path in dict.fromkeys(local):
            _fsync_path(path)
        return
    devices: dict[int, str] = {}
    for path in local:
        devices.setdefault(os.stat(path).st_dev, path)
    for dev, path in devices.items():
        watched = watch.get(dev)
        fd = os.open(path, os.O_RDONLY) if watched is None else watched
        try:
            if _SYNCFS(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"syncfs of the file system of {path} failed: {os.strerror(err)}")
        finally:
            if watched is None:
                os.close(fd)
