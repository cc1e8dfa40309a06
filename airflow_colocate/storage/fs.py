"""A minimal file-system seam over URIs, shared by the Spark jobs and the control plane.

``file://`` URIs (and bare paths) go through the standard library; every other scheme (``s3a`` is
read as ``s3``, ``s3``, ``gs``, ``hdfs``, ``abfs``) goes through ``pyarrow.fs``. Nothing here knows
about tables or buckets: that is :mod:`airflow_colocate.storage.layout`.
"""

from __future__ import annotations

import os
import shutil
import socket
from functools import lru_cache
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from airflow_colocate.core.errors import ColocateError, StorageFull
from airflow_colocate.storage.no_space import no_space

# Hadoop spellings that pyarrow knows under another name.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs"}
# Object stores: no rename (a "rename" is a copy and a delete), no directories (a prefix is there
# while an object is under it), and an object is visible whole or not at all once its PUT ends.
_OBJECT_STORES = frozenset({"s3", "s3a", "s3n", "gs", "gcs"})
NAMENODE_TIMEOUT_S = 5.0


def is_local(uri: str) -> bool:
    uri = str(uri)
    if uri.startswith(("file:/", "/")):  # the common cases without urlsplit (a repair asks 10,000s of times)
        return True
    scheme = urlsplit(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def is_object_store(uri: str) -> bool:
    uri = str(uri)
    return not uri.startswith(("file:/", "/")) and urlsplit(uri).scheme in _OBJECT_STORES


def local_path(uri: str) -> str:
    """The OS path of a ``file://`` URI or bare path (``file:///a/b``, ``file:/a/b``, ``/a/b``)."""
    uri = str(uri)
    if uri.startswith("/"):
        return uri
    if uri.startswith("file:///") and "%" not in uri and "?" not in uri and "#" not in uri:
        return uri[7:]
    parts = urlsplit(uri)
    if parts.scheme == "":
        return uri
    if parts.scheme != "file":
        raise ColocateError(f"not a local path: {uri!r}")
    if parts.netloc not in ("", "localhost"):
        raise ColocateError(f"file URI with a host is not supported: {uri!r} (use file:///path)")
    return unquote(parts.path)


def join(uri: str, name: str) -> str:
    return f"{str(uri).rstrip('/')}/{name}"


def basename(uri: str) -> str:
    return str(uri).rstrip("/").rsplit("/", 1)[-1]


def parent(uri: str) -> str:
    return str(uri).rstrip("/").rsplit("/", 1)[0]


@lru_cache(maxsize=32)
def _arrow_fs(scheme: str, netloc: str):
    try:
        from pyarrow import fs as pafs
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise ColocateError(f"pyarrow is needed for {scheme}:// URIs: {exc}") from exc
    target = f"{_SCHEME_ALIASES.get(scheme, scheme)}://{netloc}/"
    try:
        filesystem, _ = pafs.FileSystem.from_uri(target)
    except Exception as exc:
        if scheme == "hdfs":
            return _hdfs_native(netloc, exc)
        raise ColocateError(
            f"cannot open a file system for {scheme}://{netloc}: pyarrow says {exc}. Supported schemes are "
            f"file, s3/s3a, gs, hdfs (libhdfs, or the hdfs-native package) and abfs (needs a pyarrow built with Azure)"
        ) from exc
    return filesystem


def _hdfs_native(netloc: str, why: Exception):
    """HDFS through hdfs-native (HDFS's RPC spoken by a Rust client) where pyarrow finds no
    libhdfs, which needs a Hadoop installation and a JVM in this process: a control plane in an
    Airflow worker has neither. Wrapped as a pyarrow file system, so nothing else here changes."""
    try:
        from hdfs_native.fsspec import HdfsFileSystem
        from pyarrow.fs import FSSpecHandler, PyFileSystem
    except ImportError:
        raise ColocateError(f"cannot open hdfs://{netloc}: pyarrow has no libhdfs here ({str(why).splitlines()[0]}) "
                            f"and the hdfs-native package is not installed: pip install 'airflow-colocate[hdfs]'") from why
    host, _, port = netloc.partition(":")
    port = int(port) if port.isdigit() else 8020
    try:  # the client retries an unknown or silent NameNode for minutes: a first answer is asked here
        socket.create_connection((host, port), timeout=NAMENODE_TIMEOUT_S).close()
    except OSError as exc:
        raise ColocateError(f"cannot open a file system for hdfs://{netloc}: its NameNode {host}:{port} does not "
                            f"answer ({exc}); check the host and port, and that the NameNode is up") from None
    return PyFileSystem(FSSpecHandler(HdfsFileSystem(host=host, port=port)))


def _arrow(uri: str):
    """(pyarrow FileSystem, path inside it) for a non-local URI."""
    parts = urlsplit(str(uri))
    filesystem = _arrow_fs(parts.scheme, parts.netloc)
    path = unquote(parts.path)
    scheme = _SCHEME_ALIASES.get(parts.scheme, parts.scheme)
    if scheme in ("s3", "gs"):  # object stores address "bucket/key"
        path = f"{parts.netloc}{path}"
    elif scheme == "abfs":  # abfs://container@account.dfs.core.windows.net/key -> "container/key"
        path = f"{parts.netloc.split('@', 1)[0]}{path}"
    return filesystem, path.rstrip("/") or "/"


def exists(uri: str) -> bool:
    if is_local(uri):
        return os.path.exists(local_path(uri))
    from pyarrow.fs import FileType

    filesystem, path = _arrow(uri)
    return filesystem.get_file_info(path).type != FileType.NotFound


def is_dir(uri: str) -> bool:
    if is_local(uri):
        return os.path.isdir(local_path(uri))
    from pyarrow.fs import FileType

    filesystem, path = _arrow(uri)
    return filesystem.get_file_info(path).type == FileType.Directory


def makedirs(uri: str) -> None:
    if is_local(uri):
        os.makedirs(local_path(uri), exist_ok=True)
        return
    if is_object_store(uri):
        return  # a prefix needs no making: it exists once an object is put under it
    filesystem, path = _arrow(uri)
    filesystem.create_dir(path, recursive=True)


def make_dir(uri: str) -> bool:
    """Create a directory (and its parents); True when it is new, False when it was there. A local
    one costs one ``mkdir`` when its parent exists (the usual new replica directory), where
    :func:`is_dir` then :func:`makedirs` cost three system calls. Locally True means this call's
    own ``mkdir`` made it (another process making it meanwhile is False): a clone writes in
    place only in a directory it made."""
    if is_object_store(uri):  # nothing to make: "new" is a prefix with nothing under it (one listing)
        return not list_files(uri)
    if not is_local(uri):
        if is_dir(uri):
            return False
        makedirs(uri)
        return True
    path = local_path(uri)
    try:
        os.mkdir(path)
        return True
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path.rstrip("/")) or "/", exist_ok=True)
        return make_dir(path)
    except FileExistsError:
        if os.path.isdir(path):
            return False
        raise


def list_files(uri: str, missing_ok: bool = False) -> list[tuple[str, int]]:
    """(name, size) of the regular files directly inside a directory, sorted by name. On an object
    store a prefix with nothing under it is no different from a missing one (there are no empty
    directories): both list as empty."""
    if is_object_store(uri):
        missing_ok = True
    try:
        if is_local(uri):
            with os.scandir(local_path(uri)) as it:
                out = [(e.name, e.stat().st_size) for e in it if e.is_file(follow_symlinks=False)]
        else:
            from pyarrow.fs import FileSelector, FileType

            filesystem, path = _arrow(uri)
            infos = filesystem.get_file_info(FileSelector(path, allow_not_found=False, recursive=False))
            out = [(i.base_name, i.size) for i in infos if i.type == FileType.File]
    except FileNotFoundError:
        if missing_ok:
            return []
        raise
    return sorted(out)


def size(uri: str) -> int:
    if is_local(uri):
        return os.path.getsize(local_path(uri))
    filesystem, path = _arrow(uri)
    info = filesystem.get_file_info(path)
    if info.size is None:
        raise FileNotFoundError(uri)
    return info.size


def open_read(uri: str) -> BinaryIO:
    """A seekable binary stream (good for ``pyarrow.parquet.read_metadata`` too)."""
    if is_local(uri):
        return open(local_path(uri), "rb")
    filesystem, path = _arrow(uri)
    return filesystem.open_input_file(path)


def open_write(uri: str) -> BinaryIO:
    """A binary stream that creates or truncates ``uri`` (its directory must exist on local disks)."""
    if is_local(uri):
        return open(local_path(uri), "wb")
    filesystem, path = _arrow(uri)
    return filesystem.open_output_stream(path)


def _device(path: str) -> int | None:
    """st_dev of the nearest existing ancestor of ``path`` (the file may not exist yet)."""
    if not (path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/")):
        path = os.path.abspath(path)  # else it is already what abspath returns (a clone asks 1,000s of times)
    while True:
        try:
            return os.stat(path).st_dev
        except FileNotFoundError:
            up = os.path.dirname(path)
            if up == path:
                return None
            path = up


def device(uri: str) -> int | None:
    """The device of a local path, or of its nearest existing ancestor (a directory about to be
    made); None for other schemes."""
    return _device(local_path(uri)) if is_local(uri) else None


def same_device(src_uri: str, dst_uri: str) -> bool:
    """Both local and on one device: a rename or a hard link between them is possible."""
    if not (is_local(src_uri) and is_local(dst_uri)):
        return False
    a = _device(os.path.dirname(local_path(src_uri).rstrip("/")))
    b = _device(os.path.dirname(local_path(dst_uri).rstrip("/")))
    return a is not None and a == b


def can_rename(src_uri: str, dst_uri: str) -> bool:
    """Whether :func:`rename` can move ``src`` to ``dst`` atomically, without copying through this
    process: never on an object store (its rename is a copy and a delete)."""
    if is_local(src_uri) or is_local(dst_uri):
        return same_device(src_uri, dst_uri)
    if is_object_store(src_uri) or is_object_store(dst_uri):
        return False
    a, b = urlsplit(src_uri), urlsplit(dst_uri)
    return (_SCHEME_ALIASES.get(a.scheme, a.scheme), a.netloc) == (_SCHEME_ALIASES.get(b.scheme, b.scheme), b.netloc)


def rename(src_uri: str, dst_uri: str) -> None:
    """Move a file atomically within one file system, replacing ``dst``; raises if
    :func:`can_rename` is false."""
    if not can_rename(src_uri, dst_uri):
        raise ColocateError(f"cannot rename {src_uri} to {dst_uri}: not on the same file system; copy instead")
    if is_local(src_uri):
        os.replace(local_path(src_uri), local_path(dst_uri))
        return
    filesystem, src = _arrow(src_uri)
    _, dst = _arrow(dst_uri)
    _replace(filesystem, src, dst)


def _replace(filesystem, src: str, dst: str) -> None:
    """Rename ``src`` over ``dst``: HDFS's plain rename refuses an existing name (a clone repairing
    a bad replica in its own directory publishes over its old files). Through hdfs-native, HDFS's
    own rename with overwrite (one atomic NameNode call); through libhdfs, which has none, the old
    file is deleted first (only a replica no reader is given, being repaired, is published over)."""
    inner = getattr(getattr(filesystem, "handler", None), "fs", None)
    client = getattr(inner, "client", None)
    if client is not None and callable(getattr(client, "rename", None)):
        client.rename(src, dst, True)
        return
    try:
        filesystem.move(src, dst)
    except OSError:
        from pyarrow.fs import FileType

        if filesystem.get_file_info(dst).type != FileType.File:
            raise
        filesystem.delete_file(dst)
        filesystem.move(src, dst)


def delete_file(uri: str, missing_ok: bool = True) -> None:
    try:
        if is_local(uri):
            os.remove(local_path(uri))
        else:
            filesystem, path = _arrow(uri)
            filesystem.delete_file(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def delete_tree(uri: str) -> None:
    """Remove a directory and everything below it; a missing directory is fine."""
    if is_local(uri):
        path = local_path(uri)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
        return
    if not exists(uri):
        return
    filesystem, path = _arrow(uri)
    filesystem.delete_dir(path)


def read_text(uri: str) -> str:
    with open_read(uri) as f:
        return f.read().decode("utf-8")


def write_text_atomic(uri: str, text: str) -> None:
    """Write ``uri`` so that a reader never sees half of it: through a temporary sibling and a
    rename, or on an object store with one PUT (visible whole once it ends; there is no rename)."""
    if is_object_store(uri):
        with open_write(uri) as f:
            f.write(text.encode("utf-8"))
        return
    makedirs(parent(uri))
    tmp = f"{uri}.tmp-{os.urandom(6).hex()}"
    try:
        with open_write(tmp) as f:
            f.write(text.encode("utf-8"))
            if is_local(tmp):  # a pyarrow stream has fileno() too, but it raises: HDFS syncs on close
                f.flush()
                os.fsync(f.fileno())
        rename(tmp, uri)
    except BaseException as exc:
        delete_file(tmp)
        full = no_space(exc, parent(uri), f"writing {basename(uri)}")
        if full is not None:
            raise StorageFull(f"{full}; nothing was written there: free space on that disk (or use another "
                              "directory), then run again") from exc
        raise
