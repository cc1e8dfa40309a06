"""A passthrough file system whose reads stall: a slow or hanging disk, for real.

Why this mechanism (the choice the stalled-backend tests rest on): a backend here is a local
directory, so the stall has to happen in the kernel's file system path, under every reader (pyarrow
in this process, Spark's JVM, a clone's worker processes). The kernel has no device-mapper here
(no ``delay`` target), ``tc netem`` only delays a network link and our backends are not reached over
one, and the usual FUSE bindings need libfuse, which the machine lacks. ``/dev/fuse`` itself is
present, and its protocol is small for a plain passthrough, so this module speaks it directly:
a mount of type ``fuse`` whose answers come from threads in this process, each READ answered only
after ``delay`` seconds (direct I/O: the page cache never hides a stall). Writes pass through
undelayed (a repair may clone onto the stalled backend too).

``SlowFs(source, mountpoint, delay)`` mounts ``source`` on ``mountpoint``; ``delay`` can be changed
while mounted; leaving the context unmounts (lazily) and stops the threads.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
import threading
import time
from pathlib import Path

_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
_MNT_DETACH = 2
_MS_NOSUID, _MS_NODEV = 2, 4

LOOKUP, FORGET, GETATTR, OPEN, READ, STATFS, RELEASE, FLUSH = 1, 2, 3, 14, 15, 17, 18, 25
INIT, OPENDIR, READDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = 26, 27, 28, 29, 36, 38, 42
SETATTR, MKDIR, UNLINK, RMDIR, RENAME, LINK, WRITE, FSYNC, FSYNCDIR, CREATE, RENAME2 = 4, 9, 10, 11, 12, 13, 16, 20, 30, 35, 45
_NO_REPLY = {FORGET, INTERRUPT, BATCH_FORGET}

_IN = struct.Struct("<IIQQIIII")  # len, opcode, unique, nodeid, uid, gid, pid, padding
_OUT = struct.Struct("<IiQ")  # len, error, unique
_ATTR = struct.Struct("<QQQQQQIIIIIIIIII")
_READ_IN = struct.Struct("<QQIIQII")
_BUFFER = (1 << 20) + 8192
_MAX_WRITE = 128 * 1024


def _attr(st: os.stat_result) -> bytes:
    return _ATTR.pack(st.st_ino, st.st_size, st.st_blocks, int(st.st_atime), int(st.st_mtime), int(st.st_ctime),
                      0, 0, 0, st.st_mode, st.st_nlink, st.st_uid, st.st_gid, 0, 4096, 0)


class SlowFs:
    def __init__(self, source: Path, mountpoint: Path, delay: float = 0.0, threads: int = 4) -> None:
        self.source, self.mountpoint, self.delay = Path(source), Path(mountpoint), delay
        self.reads = 0  # READ requests answered: a test checks the stall was met
        self._paths = {1: str(self.source)}
        self._ids = {str(self.source): 1}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, daemon=True, name=f"slowfs-{i}") for i in range(threads)]
        self._fd = -1

    # -- mount ----------------------------------------------------------------------------------

    def __enter__(self) -> SlowFs:
        self._fd = os.open("/dev/fuse", os.O_RDWR)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        options = f"fd={self._fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
        if _LIBC.mount(b"slowfs", str(self.mountpoint).encode(), b"fuse", _MS_NOSUID | _MS_NODEV, options) != 0:
            err = ctypes.get_errno()
            os.close(self._fd)
            raise OSError(err, f"mounting a FUSE file system on {self.mountpoint}: {os.strerror(err)}")
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.delay = 0.0
        _LIBC.umount2(str(self.mountpoint).encode(), _MNT_DETACH)
        time.sleep(0.05)
        try:
            os.close(self._fd)
        except OSError:
            pass
        for t in self._threads:
            t.join(timeout=5)

    # -- protocol -------------------------------------------------------------------------------

    def _node(self, path: str) -> int:
        with self._lock:
            node = self._ids.get(path)
            if node is None:
                node = len(self._paths) + 1
                self._paths[node], self._ids[path] = path, node
            return node

    def _entry(self, path: str) -> bytes:
        return struct.pack("<QQQQII", self._node(path), 0, 1, 1, 0, 0) + _attr(os.lstat(path))

    def _make(self, opcode: int, path: str, arg: bytes) -> bytes:
        """MKDIR, CREATE (entry and open file) and LINK, done on the source directory."""
        if opcode == MKDIR:
            mode, umask = struct.unpack_from("<II", arg)
            child = os.path.join(path, arg[8:].split(b"\0", 1)[0].decode())
            os.mkdir(child, mode & ~umask)
            return self._entry(child)
        if opcode == LINK:
            child = os.path.join(path, arg[8:].split(b"\0", 1)[0].decode())
            os.link(self._paths[struct.unpack_from("<Q", arg)[0]], child)
            return self._entry(child)
        flags, mode, umask, _ = struct.unpack_from("<IIII", arg)
        child = os.path.join(path, arg[16:].split(b"\0", 1)[0].decode())
        keep = os.O_ACCMODE | os.O_TRUNC | os.O_APPEND | os.O_CREAT | os.O_EXCL
        fd = os.open(child, flags & keep, mode & ~umask)
        return self._entry(child) + struct.pack("<QII", fd, 1, 0)

    def _moved(self, src: str, dst: str) -> None:
        """Node ids follow a renamed file or folder (the kernel keeps using them), and whatever was
        at ``dst`` before is forgotten."""
        with self._lock:
            for node, p in list(self._paths.items()):
                if p == dst or p.startswith(dst + "/"):
                    del self._ids[p]
                    self._paths[node] = p + "\0gone"
            for node, p in list(self._paths.items()):
                if p == src or p.startswith(src + "/"):
                    moved = dst + p[len(src):]
                    del self._ids[p]
                    self._paths[node], self._ids[moved] = moved, node

    def _reply(self, unique: int, body: bytes = b"", error: int = 0) -> None:
        try:
            os.write(self._fd, _OUT.pack(_OUT.size + len(body), -error, unique) + body)
        except OSError:  # the request was interrupted, or the file system is going away
            pass

    def _serve(self) -> None:
        while True:
            try:
                data = os.read(self._fd, _BUFFER)
            except OSError as exc:
                if exc.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue  # ENOENT: a request interrupted before it was read
                return  # ENODEV: unmounted
            if not data:
                return
            _, opcode, unique, node, *_ = _IN.unpack_from(data)
            if opcode in _NO_REPLY:
                continue
            try:
                body = self._answer(opcode, node, data[_IN.size:])
                self._reply(unique, body)
            except OSError as exc:
                self._reply(unique, error=exc.errno or errno.EIO)
            if opcode == DESTROY:
                return

    def _answer(self, opcode: int, node: int, arg: bytes) -> bytes:
        path = self._paths.get(node)
        if opcode == INIT:
            major, minor, readahead, _flags = struct.unpack_from("<IIII", arg)
            return struct.pack("<IIIIHHIIHHI7I", 7, 31, readahead, 0, 16, 12, _MAX_WRITE, 1, 0, 0, 0, *[0] * 7)
        if path is None:
            raise OSError(errno.ESTALE, "unknown node")
        if opcode == LOOKUP:
            child = os.path.join(path, arg.split(b"\0", 1)[0].decode())
            st = os.lstat(child)
            return struct.pack("<QQQQII", self._node(child), 0, 1, 1, 0, 0) + _attr(st)
        if opcode in (MKDIR, CREATE, LINK):
            return self._make(opcode, path, arg)
        if opcode in (UNLINK, RMDIR):
            (os.unlink if opcode == UNLINK else os.rmdir)(os.path.join(path, arg.split(b"\0", 1)[0].decode()))
            return b""
        if opcode in (RENAME, RENAME2):
            newdir, names = struct.unpack_from("<Q", arg)[0], arg[8 if opcode == RENAME else 16:]
            old, new, *_ = names.split(b"\0")
            src, dst = os.path.join(path, old.decode()), os.path.join(self._paths[newdir], new.decode())
            os.rename(src, dst)
            self._moved(src, dst)
            return b""
        if opcode == SETATTR:
            valid, _, fh, size, _, atime, mtime, _, _, _, _, mode = struct.unpack_from("<IIQQQQQQIIII", arg)
            if valid & 8:
                os.truncate(path, size)
            if valid & 1:
                os.chmod(path, stat.S_IMODE(mode))
            if valid & (16 | 32 | 128 | 256):
                now = time.time()
                st = os.lstat(path)
                os.utime(path, (now if valid & 128 else atime if valid & 16 else st.st_atime,
                                now if valid & 256 else mtime if valid & 32 else st.st_mtime))
            return struct.pack("<QII", 1, 0, 0) + _attr(os.lstat(path))
        if opcode == WRITE:
            fh, offset, size = struct.unpack_from("<QQI", arg)
            return struct.pack("<II", os.pwrite(fh, arg[40:40 + size], offset), 0)
        if opcode == FSYNC:
            os.fsync(struct.unpack_from("<Q", arg)[0])
            return b""
        if opcode == FSYNCDIR:
            return b""
        if opcode == GETATTR:
            return struct.pack("<QII", 1, 0, 0) + _attr(os.lstat(path))
        if opcode == OPEN:
            (flags,) = struct.unpack_from("<I", arg)
            keep = os.O_ACCMODE | os.O_TRUNC | os.O_APPEND
            return struct.pack("<QII", os.open(path, flags & keep), 1, 0)  # FOPEN_DIRECT_IO
        if opcode == READ:
            fh, offset, size, *_ = _READ_IN.unpack_from(arg)
            if self.delay:
                time.sleep(self.delay)
            self.reads += 1
            return os.pread(fh, size, offset)
        if opcode == RELEASE:
            os.close(struct.unpack_from("<Q", arg)[0])
            return b""
        if opcode in (FLUSH, RELEASEDIR):
            return b""
        if opcode == OPENDIR:
            return struct.pack("<QII", 0, 0, 0)
        if opcode == READDIR:
            _, offset, size, *_ = _READ_IN.unpack_from(arg)
            names = [".", "..", *sorted(os.listdir(path))]
            out = b""
            for i, name in enumerate(names[offset:], start=offset + 1):
                raw = name.encode()
                try:
                    mode = os.lstat(os.path.join(path, name)).st_mode
                except OSError:
                    continue
                entry = struct.pack("<QQII", 1, i, len(raw), stat.S_IFMT(mode) >> 12) + raw
                entry += b"\0" * (-len(entry) % 8)
                if len(out) + len(entry) > size:
                    break
                out += entry
            return out
        if opcode == STATFS:
            st = os.statvfs(path)
            return struct.pack("<QQQQQIIII6I", st.f_blocks, st.f_bfree, st.f_bavail, st.f_files, st.f_ffree,
                               st.f_bsize, 255, st.f_frsize, 0, *[0] * 6)
        if opcode == DESTROY:
            return b""
        raise OSError(errno.ENOSYS, "not implemented")
