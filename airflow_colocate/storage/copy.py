"""The one copy primitive that the write job and the clone (balance/repair) job share.

A copy hashes while it reads, writes to a temporary file in the backend's tmp area (never inside a
replica directory, where Spark would read a killed copy's file as duplicate rows), syncs, checks
the size, and only then renames to ``dst``; on an object store it goes to its final key (no
rename there). What a replica directory holds: ``storage/replica_dir.py``; when bytes and names
are durable: ``storage/durability.py``; this module is the order of a copy's steps.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import threading
import time
from dataclasses import dataclass

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.storage import fs, layout, s3
from airflow_colocate.storage.durability import WRITEBACK_MIN, start_writeback
from airflow_colocate.storage.no_space import no_space
from airflow_colocate.storage.replica_dir import TMP_MARK, _names, is_data_name, replica_files, subdirs

CHUNK = 8 * 1024 * 1024


class StagingError(ColocateError):
    """The destination cannot stage a copy (its root is gone): its problem, not the bytes'."""


def tmp_area(root: str) -> str:
    """The backend's tmp area, created if needed; refuses a missing root (a lost disk must not
    come back as an empty folder because a copy wanted to write to it)."""
    if not fs.exists(root):
        raise StagingError(f"backend root {root} does not exist (a lost or unmounted disk): nothing is copied there")
    area = layout.tmp_dir(root)
    if not fs.is_dir(area):  # a stat, not a mkdir per copied file: 0.2 ms each, 10,000s in a repair
        fs.makedirs(area)
    return area


def staging_area(root: str, dst_dir: str, checked: dict | None = None) -> str | None:
    """The backend's tmp area (:func:`tmp_area`) for copies into the directory ``dst_dir``, checked
    once for all its files: on the same file system, so the final rename is atomic. ``checked``:
    what a batch already found, for each root (area, its device) and for each replica directory's
    parent (its device): its clones share a few roots and each partition's version directory,
    and the device of a directory about to be made is found by a walk up of failing ``stat``-s.
    None on an object store, once its root is found: copies go to their final keys there
    (:func:`_stage_on_object_store`)."""
    if fs.is_object_store(dst_dir):  # its root asked once per batch (a request, not a stat)
        if checked is None or ("store", root) not in checked:
            if not fs.exists(root):
                raise StagingError(f"backend root {root} does not exist (a lost bucket or prefix): nothing is copied there")
            if checked is not None:
                checked[("store", root)] = True
        return None
    found = checked.get(root) if checked is not None else None
    if found is None:
        area = tmp_area(root)
        found = (area, fs.device(area))
        if checked is not None:
            checked[root] = found
    area, device = found
    if device is not None and fs.is_local(dst_dir):
        parent = fs.parent(dst_dir)
        if checked is None:
            here = fs.device(parent)
        elif (here := checked.get(("device", parent))) is None:
            here = checked[("device", parent)] = fs.device(parent)
        same = here == device
    else:
        same = fs.can_rename(fs.join(area, "x"), fs.join(dst_dir, "x"))
    if not same:
        raise StagingError(f"cannot stage a copy to {dst_dir} in {area}: not the same file system "
                           f"as the replica directory, so the final rename would not be atomic")
    return area


def _tmp_uri(dst_uri: str, root: str | None = None, area: str | None = None) -> str:
    """A temporary name for a copy to ``dst_uri``: in the backend's tmp area when its root is known
    (the name says when it started, for gc), else next to ``dst_uri``. ``area``: the tmp area
    :func:`staging_area` already checked for ``dst_uri``'s directory."""
    name = f"{fs.basename(dst_uri)}{TMP_MARK}{int(time.time())}-{os.urandom(6).hex()}"
    if area is not None:
        return fs.join(area, name)
    if root is None:
        return fs.join(fs.parent(dst_uri), name)
    tmp = fs.join(tmp_area(root), name)
    if not fs.can_rename(tmp, dst_uri):
        raise StagingError(f"cannot stage a copy to {dst_uri} in {layout.tmp_dir(root)}: not the same file system "
                            f"as the replica directory, so the final rename would not be atomic")
    return tmp


_BUFFERS = threading.local()


def _read_buffer(size: int) -> memoryview:
    """``size`` bytes of this thread's read buffer, which grows to the largest size asked: reading
    a large file into it spares an allocation per chunk (8 MiB of fresh pages to fault in and zero
    each time, then to give back)."""
    buf = getattr(_BUFFERS, "buf", None)
    if buf is None or len(buf) < size:
        buf = _BUFFERS.buf = bytearray(size)
    return memoryview(buf)[:size]


def sha256_file(uri: str) -> str:
    h = hashlib.sha256()
    with fs.open_read(uri) as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Staged:
    """A copy written and checked in the destination's tmp area, not yet under its final name; or,
    ``in_place``, written and checked under its final name in a directory nobody reads yet
    (:func:`stage_in_place`: ``tmp`` is then that name)."""

    tmp: str
    dst: str
    bytes: int
    sha256: str | None  # None: an object store's copy proven by its recorded ETag (storage/s3.py)
    in_place: bool = False
    inode: tuple[int, int] | None = None  # (device, inode) of a file written in place: see discard()
    etag: str | None = None  # on an object store, the ETag of the answer that proved the bytes


def discard(staged: Staged) -> None:
    """Delete what :func:`stage_file` or :func:`stage_in_place` wrote, and nothing else: a file
    written in place only while its name holds this copy's file (a speculative task's may be there)."""
    if staged.in_place and staged.inode is not None:
        _delete_own(staged.tmp, staged.inode)
    else:
        fs.delete_file(staged.tmp)


def _delete_own(path: str, inode: tuple[int, int]) -> None:
    try:
        st = os.lstat(path)
        if (st.st_dev, st.st_ino) == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


def stage_file(src_uri: str, dst_uri: str, *, expect_sha256: str | None = None,
               root: str | None = None, fsync: bool = False, area: str | None = None,
               expect_bytes: int | None = None, expect_etag: str | None = None) -> Staged:
    """``expect_bytes``: the catalog's size of the file, with ``expect_sha256`` (a store that
    vouches for the copy's SHA-256 needs not be asked its size). ``expect_etag``: the source's ETag
    the catalog recorded with ``expect_bytes``, on an object store (:func:`storage.s3.copy`)."""
    try:
        return _stage_file(src_uri, dst_uri, expect_sha256=expect_sha256, root=root, fsync=fsync, area=area,
                           expect_bytes=expect_bytes, expect_etag=expect_etag)
    except OSError as exc:  # a full destination: named by its root, and never the source's fault
        raise no_space(exc, root or fs.parent(dst_uri), f"copying {fs.basename(src_uri)} to {dst_uri}") or exc


def _stage_file(src_uri: str, dst_uri: str, *, expect_sha256: str | None,
                root: str | None, fsync: bool, area: str | None, expect_bytes: int | None = None,
                expect_etag: str | None = None) -> Staged:
    """Copy ``src`` to a temporary name for ``dst`` (hashed, size checked), and stop there: the
    caller makes a whole batch durable at once (:func:`make_durable`) before it :func:`publish`-es
    them (2,000 small files: one ``syncfs``, not 2,000 ``fsync``). A failed copy leaves nothing;
    errors are :func:`copy_file`'s. ``area``: see :func:`_tmp_uri`. Without ``fsync`` a large
    file's write-back starts at once (:func:`start_writeback`), so the batch's ``syncfs`` finds it
    under way. Local to local, the bytes go through raw descriptors (:func:`_copy_local`: Python's
    buffered files cost more CPU than the kernel's copy), a batch's temporary file opened with one
    system call (:func:`_stage_local`); any other stream is written through its ``write``; onto an
    object store, see :func:`_stage_on_object_store`."""
    if fs.is_object_store(dst_uri):
        return _stage_on_object_store(src_uri, dst_uri, expect_sha256, expect_bytes, expect_etag)
    batch = area is not None and not fsync and _FAST_LOCAL
    if batch and fs.is_local(area) and fs.is_local(src_uri) and fs.is_local(dst_uri):
        return _stage_local(src_uri, dst_uri, expect_sha256, area)
    tmp = _tmp_uri(dst_uri, root, area)
    try:
        with fs.open_write(tmp) as dst:
            if _FAST_LOCAL and type(dst) is io.BufferedWriter and fs.is_local(src_uri):
                written, digest = _copy_local(fs.local_path(src_uri), dst.fileno(), fs.local_path(tmp),
                                              writeback=not fsync)
                by_descriptors = True
            else:
                written, digest = _copy_stream(src_uri, tmp, dst)
                by_descriptors = False
            on_disk = None
            if fs.is_local(tmp):  # a remote stream (HDFS) is durable when closed; its fileno() raises
                dst.flush()
                if fsync:
                    os.fsync(dst.fileno())
                on_disk = os.fstat(dst.fileno()).st_size
                if not fsync and not by_descriptors and written >= WRITEBACK_MIN:
                    start_writeback(dst.fileno())
        if expect_sha256 is not None and digest != expect_sha256:
            _wrong_checksum(src_uri, dst_uri, expect_sha256, digest, by_descriptors)
        on_disk = fs.size(tmp) if on_disk is None else on_disk
        if on_disk != written:
            _wrong_size(src_uri, dst_uri, written, on_disk)
    except BaseException:
        fs.delete_file(tmp)
        raise
    return Staged(tmp, dst_uri, written, digest)


def _stage_on_object_store(src_uri: str, dst_uri: str, expect_sha256: str | None,
                           expect_bytes: int | None = None, expect_etag: str | None = None) -> Staged:
    """To its final key at once (no rename there; nobody reads it before the catalog commit, and gc
    removes a killed copy's): by the store where it can (:func:`~airflow_colocate.storage.s3.put`)."""
    try:
        done = s3.put(src_uri, dst_uri, expect_sha256, fs.open_read, sha256_file, expect_bytes, expect_etag)
        if done is None:
            with fs.open_write(dst_uri) as dst:
                done = (*_copy_stream(src_uri, dst_uri, dst), None)
            if expect_sha256 is not None and done[1] != expect_sha256:
                _wrong_checksum(src_uri, dst_uri, expect_sha256, done[1], False)
    except BaseException:
        fs.delete_file(dst_uri)
        raise
    return Staged(dst_uri, dst_uri, done[0], done[1], in_place=True, etag=done[2])


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)  # what open(path, "wb") asks


def _stage_local(src_uri: str, dst_uri: str, expect_sha256: str | None, area: str) -> Staged:
    """:func:`stage_file` of a local file into the checked local tmp area ``area``: the same copy
    (:func:`_copy_local`), checks, messages and cleanup, but the temporary file is opened with one
    ``open(2)`` instead of Python's ``open(..., "wb")`` (a file object and a buffer, an ``fstat``,
    an ``ioctl`` and an ``lseek`` more, per file of a repair's thousands), and the staged ``tmp``
    is its OS path."""
    tmp = f"{fs.local_path(area).rstrip('/')}/{fs.basename(dst_uri)}{TMP_MARK}{int(time.time())}-{os.urandom(6).hex()}"
    try:
        written, digest = _copy_checked(src_uri, dst_uri, os.open(tmp, _CREATE, 0o666), tmp, expect_sha256)
    except BaseException:
        fs.delete_file(tmp)
        raise
    return Staged(tmp, dst_uri, written, digest)


def _copy_checked(src_uri: str, dst_uri: str, dfd: int, path: str, expect_sha256: str | None) -> tuple[int, str]:
    """Copy the local ``src`` into the open descriptor ``dfd`` of the file ``path`` (closed here),
    then the checks every staged copy makes: the checksum against the catalog's and the size on disk
    against the bytes written. (bytes, sha256); the caller removes the file when this raises."""
    try:
        written, digest = _copy_local(fs.local_path(src_uri), dfd, path, writeback=True)
        on_disk = os.fstat(dfd).st_size
    finally:
        os.close(dfd)
    if expect_sha256 is not None and digest != expect_sha256:
        _wrong_checksum(src_uri, dst_uri, expect_sha256, digest, True)
    if on_disk != written:
        _wrong_size(src_uri, dst_uri, written, on_disk)
    return written, digest


_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def stage_in_place(src_uri: str, dst_uri: str, expect_sha256: str | None = None) -> Staged:
    """Copy the local file ``src`` to the new local file ``dst`` itself (hashed, size checked),
    for a clone into a replica directory it has just made and that no catalog row names: nobody
    reads there before the clone is registered, so the tmp area and the rename buy nothing, and
    the batch's bytes and names are made durable in one pass. The file must not exist (``O_EXCL``);
    a failed copy deletes it. The same copy, checks and messages as :func:`stage_file`."""
    path = fs.local_path(dst_uri)
    inode = None
    try:
        dfd = os.open(path, _CREATE_NEW, 0o666)
        try:
            made = os.fstat(dfd)
        except BaseException:
            os.close(dfd)
            raise
        inode = (made.st_dev, made.st_ino)
        written, digest = _copy_checked(src_uri, dst_uri, dfd, path, expect_sha256)
    except BaseException as exc:
        if inode is not None:  # (else an empty file nobody reads: the next clone of it replaces it)
            _delete_own(path, inode)
        raise no_space(exc, fs.parent(dst_uri), f"copying {fs.basename(src_uri)} to {dst_uri}") or exc
    return Staged(path, dst_uri, written, digest, in_place=True, inode=inode)


def _wrong_checksum(src_uri: str, dst_uri: str, expect_sha256: str, digest: str, by_descriptors: bool):
    """Raise for a copy that hashed ``digest`` instead of ``expect_sha256``: the destination's
    fault (:class:`StagingError`, retried) when the kernel copied the bytes and the source still
    hashes right, else the source's (:class:`ColocateError`)."""
    if by_descriptors and sha256_file(src_uri) == expect_sha256:  # the kernel's copy, not the source
        raise StagingError(
            f"the copy of {src_uri} to {dst_uri} hashed {digest} where it landed, but the source still "
            f"hashes {expect_sha256} as the catalog recorded: the destination (or the kernel's copy) "
            f"changed the bytes, not the source; the copy was deleted and is retried later")
    raise ColocateError(
        f"checksum mismatch copying {src_uri} to {dst_uri}: expected sha256 {expect_sha256}, "
        f"got {digest}; the copy was deleted"
    )


def _wrong_size(src_uri: str, dst_uri: str, written: int, on_disk: int):
    raise ColocateError(
        f"size mismatch copying {src_uri} to {dst_uri}: wrote {written} bytes but the destination "
        f"holds {on_disk}; the copy was deleted"
    )


def _copy_stream(src_uri: str, tmp: str, dst) -> tuple[int, str]:
    """Read ``src`` and write it to the stream ``dst``, hashing what is written: (bytes, sha256)."""
    h = hashlib.sha256()
    written = 0
    with fs.open_read(src_uri) as src:
        # reads sized to a small file (an 8 MiB buffer per read is a large allocation each time)
        local = fs.is_local(src_uri)
        want = min(CHUNK, os.fstat(src.fileno()).st_size + 1) if local else CHUNK
        if local and fs.is_local(tmp):  # a local write copies the bytes before it returns: one buffer serves
            view = _read_buffer(want)
            while n := src.readinto(view):
                with view[:n] as chunk:
                    h.update(chunk)
                    dst.write(chunk)
                written += n
        else:  # another stream may keep what it is given (an object store's upload): fresh bytes
            while chunk := src.read(want):
                h.update(chunk)
                dst.write(chunk)
                written += len(chunk)
    return written, h.hexdigest()


# Below this size a local copy is one ``pread`` of the source, hashed, and written from that same
# buffer (the hashed bytes are the written bytes); from it on, the kernel copies the bytes
# (``copy_file_range``: no trip through this process) and the copy is then hashed where it landed
# (read back from the temporary file, in the page cache). Both hash what the destination holds,
# never the source beside it. Read back, not mapped: a page that cannot be read (a failing disk, a
# soft mount) is then an error of this one copy, where a mapping would kill the process (SIGBUS).
# The split costs less CPU than either way alone over bench_repair's mix of file sizes.
SMALL_COPY = 1 << 20
_FAST_LOCAL = hasattr(os, "pread") and hasattr(os, "preadv") and hasattr(os, "pwrite")
FAST_LOCAL = _FAST_LOCAL  # raw-descriptor copies work here (the clone job asks before it writes in place)
# copy_file_range's "not here" answers (another file system, an old kernel, a file system without
# it): the copy then goes through this process's buffer instead
_NO_RANGE_COPY = frozenset(getattr(errno, name) for name in ("EXDEV", "ENOSYS", "EINVAL", "EOPNOTSUPP", "ENOTSUP")
                           if hasattr(errno, name))


def _copy_local(src: str, dfd: int, tmp: str, *, writeback: bool) -> tuple[int, str]:
    """Copy the local file ``src`` into the empty file open on ``dfd`` (the path ``tmp``) through
    raw descriptors: (bytes written, sha256 of the bytes the destination holds). ``writeback``:
    start the destination's write-back once its bytes are written (:func:`start_writeback`)."""
    sfd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(sfd).st_size
        if size < SMALL_COPY:
            return _copy_small(sfd, dfd, size, writeback)
        return _copy_range(sfd, dfd, size, tmp, writeback)
    finally:
        os.close(sfd)


def _write_all(fd: int, data, offset: int) -> int:
    """Write all of ``data`` at ``offset`` (a short write is continued); returns its length."""
    done, total = 0, len(data)
    with memoryview(data) as view:
        while done < total:
            done += os.pwrite(fd, view[done:], offset + done)
    return total


def _copy_small(sfd: int, dfd: int, size: int, writeback: bool) -> tuple[int, str]:
    """One read of the whole file (one byte more: a file grown since its ``stat`` is copied
    through the loop, to its end), hashed, and the same bytes written."""
    data = os.pread(sfd, size + 1, 0)
    if len(data) != size:  # grown since its stat, or a short read (some network file systems): to its end
        return _copy_loop(sfd, dfd, writeback)
    digest = hashlib.sha256(data).hexdigest()
    written = os.pwrite(dfd, data, 0)
    if written < size:  # a short write: continued
        written += _write_all(dfd, memoryview(data)[written:], written)
    if writeback and written >= WRITEBACK_MIN:
        start_writeback(dfd)
    return written, digest


def _copy_range(sfd: int, dfd: int, size: int, tmp: str, writeback: bool) -> tuple[int, str]:
    """The kernel copies the bytes to the source's end, the write-back starts, and the destination
    is read back from ``tmp`` and hashed while the disk writes it."""
    offset = 0
    copy_range = getattr(os, "copy_file_range", None)  # Linux; looked up here, so a test can stand in for it
    try:
        while copy_range is not None and (n := copy_range(sfd, dfd, max(size - offset, CHUNK), offset, offset)):
            offset += n
    except OSError as exc:
        if exc.errno not in _NO_RANGE_COPY:
            raise
        offset = 0
    if offset == 0:  # not supported here, or a file system that copies nothing (some do): through a buffer
        os.ftruncate(dfd, 0)
        return _copy_loop(sfd, dfd, writeback)
    if writeback and offset >= WRITEBACK_MIN:
        start_writeback(dfd)
    rfd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
    try:
        h, view, done = hashlib.sha256(), _read_buffer(CHUNK), 0
        while n := os.preadv(rfd, [view], done):
            with view[:n] as chunk:
                h.update(chunk)
            done += n
    finally:
        os.close(rfd)
    return offset, h.hexdigest()


def _copy_loop(sfd: int, dfd: int, writeback: bool) -> tuple[int, str]:
    """Read, hash and write through this thread's buffer, to the source's end."""
    h = hashlib.sha256()
    offset = 0
    view = _read_buffer(min(CHUNK, os.fstat(sfd).st_size + 1))
    while n := os.preadv(sfd, [view], offset):
        with view[:n] as chunk:
            h.update(chunk)
            _write_all(dfd, chunk, offset)
        offset += n
    if writeback and offset >= WRITEBACK_MIN:
        start_writeback(dfd)
    return offset, h.hexdigest()


def publish(staged: Staged) -> None:
    """Rename a staged copy to its final name (same file system, checked when staged)."""
    if staged.in_place:
        return
    try:
        if fs.is_local(staged.tmp) and fs.is_local(staged.dst):
            os.replace(fs.local_path(staged.tmp), fs.local_path(staged.dst))
        else:
            fs.rename(staged.tmp, staged.dst)
    except BaseException:
        fs.delete_file(staged.tmp)
        raise


def copy_file(src_uri: str, dst_uri: str, *, expect_sha256: str | None = None,
              root: str | None = None) -> tuple[int, str]:
    """Copy one file; returns (bytes, sha256 hex) of what was written.

    With ``expect_sha256``, a copy whose bytes hash differently is deleted and a
    :class:`ColocateError` names both ends and both checksums. ``root``: the destination backend's
    root, whose tmp area holds the copy until it is verified (without it, a sibling of ``dst``).
    The file is fsynced before it is renamed into place: one file, durable on its own (the clone
    job batches instead: :func:`stage_file`, :func:`make_durable`, :func:`publish`).
    """
    staged = stage_file(src_uri, dst_uri, expect_sha256=expect_sha256, root=root, fsync=True)
    publish(staged)
    return staged.bytes, staged.sha256


def link_or_copy(src_uri: str, dst_uri: str, *, root: str | None = None) -> tuple[int, str]:
    """Hard-link ``src`` to ``dst`` when both are on one local device, else :func:`copy_file`.

    Returns (bytes, sha256); the checksum of a link is read from the (shared) bytes.
    """
    if fs.same_device(src_uri, dst_uri):
        tmp = _tmp_uri(dst_uri, root)
        try:
            os.link(fs.local_path(src_uri), fs.local_path(tmp))
            os.replace(fs.local_path(tmp), fs.local_path(dst_uri))
        except OSError:
            fs.delete_file(tmp)  # e.g. a file system without hard links: copy below
        else:
            return fs.size(dst_uri), sha256_file(dst_uri)
    return copy_file(src_uri, dst_uri, root=root)


def copy_replica(src_dir: str, dst_dir: str, *, expect: dict[str, str] | None = None, link: bool = False,
                 root: str | None = None) -> tuple[list[tuple[str, str]], int]:
    """Copy every file of one replica directory into ``dst_dir`` (created if missing).

    Returns ([(name, sha256), ...] sorted by name, total bytes). ``expect`` maps file names to the
    sha256 each must have (a clone from a reported replica); the set of names must match too. A
    temporary, hidden or directory entry in the source is refused: it is no file of the replica.
    ``link=True`` hard-links instead of copying when both directories are on one local device (the
    carry-over of base files on append: the files are immutable, so sharing the inode is safe).
    ``root``: the destination backend's root (temporary copies go to its tmp area).
    """
    try:
        names = replica_files(src_dir)
    except FileNotFoundError:
        raise ColocateError(f"replica directory {src_dir} does not exist") from None
    unknown = [n for n, _ in names if not is_data_name(n)] + [d + "/" for d in subdirs(src_dir)]
    if unknown:
        raise ColocateError(f"replica {src_dir} holds files that are no part of it: {_names(sorted(unknown))}; "
                            f"nothing was copied (repair the replica: 'colocate balance --verify')")
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
            n, digest = link_or_copy(src, dst, root=root)
            if want is not None and digest != want:
                fs.delete_file(dst)
                raise ColocateError(
                    f"checksum mismatch carrying {src} to {dst}: expected sha256 {want}, got {digest}; "
                    f"the copy was deleted"
                )
        else:
            n, digest = copy_file(src, dst, expect_sha256=want, root=root)
        out.append((name, digest))
        total += n
    return out, total
