"""What a replica directory holds, and what is wrong with it against what the catalog recorded.

:func:`replica_files` lists *every* file of a replica directory, temporary names included, and
:func:`replica_problem` says what is wrong with a listing: reads, verify and clones refuse a
directory holding a file nobody committed. A replica's checksum is a sha256 over its sorted
``name:sha256`` lines, so two byte-identical replicas have the same checksum wherever they live.
A temporary file's name carries :data:`TMP_MARK` and the time it was started, so gc can tell a
copy under way from one a killed job left.
"""

from __future__ import annotations

import hashlib
import os
import re

from airflow_colocate.storage import fs

TMP_MARK = ".tmp-"
_TMP_TIME = re.compile(r"\.tmp-(\d{9,})-[0-9a-f]+$")


def is_tmp_name(name: str) -> bool:
    return TMP_MARK in name


def tmp_time(name: str) -> int | None:
    """When a temporary file was started (unix seconds, from its name); None for a name without
    one (made before 0.2)."""
    m = _TMP_TIME.search(name)
    return int(m.group(1)) if m else None


def replica_checksum(files: list[tuple[str, str]]) -> str:
    """sha256 over the sorted ``name:sha256\\n`` lines: equal for byte-identical replicas."""
    h = hashlib.sha256()
    for name, digest in sorted(files):
        h.update(f"{name}:{digest}\n".encode("utf-8"))
    return h.hexdigest()


def replica_entries(dir_uri: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(:func:`replica_files`, :func:`subdirs`) of one directory in one listing; a missing
    directory raises ``FileNotFoundError``."""
    if not fs.is_local(dir_uri):  # one listing request answers both
        return _remote_entries(dir_uri)
    files, dirs = [], []
    with os.scandir(fs.local_path(dir_uri)) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                files.append((e.name, e.stat().st_size))
            elif e.is_dir(follow_symlinks=False):
                dirs.append(e.name)
    return sorted(files), sorted(dirs)


def _remote_entries(dir_uri: str) -> tuple[list[tuple[str, int]], list[str]]:
    """:func:`replica_entries` through pyarrow: on an object store a missing prefix lists as empty
    (there are no empty directories to tell it from), elsewhere it raises ``FileNotFoundError``."""
    from pyarrow.fs import FileSelector, FileType

    filesystem, path = fs._arrow(dir_uri)
    try:
        infos = filesystem.get_file_info(FileSelector(path, allow_not_found=fs.is_object_store(dir_uri),
                                                      recursive=False))
    except FileNotFoundError:
        raise FileNotFoundError(dir_uri) from None
    files = sorted((i.base_name, i.size) for i in infos if i.type == FileType.File)
    return files, sorted(i.base_name for i in infos if i.type == FileType.Directory)


def replica_files(dir_uri: str) -> list[tuple[str, int]]:
    """(name, size) of *every* file in one replica directory, temporary and hidden names included:
    whatever is there, Spark may read it."""
    return fs.list_files(dir_uri)


def subdirs(dir_uri: str) -> list[str]:
    """Names of the directories inside ``dir_uri`` (Spark reads files below them too)."""
    if fs.is_local(dir_uri):
        try:
            with os.scandir(fs.local_path(dir_uri)) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []
    from pyarrow.fs import FileSelector, FileType

    filesystem, path = fs._arrow(dir_uri)
    infos = filesystem.get_file_info(FileSelector(path, allow_not_found=True, recursive=False))
    return sorted(i.base_name for i in infos if i.type == FileType.Directory)


def is_data_name(name: str) -> bool:
    """A name a replica written by this package can hold (not temporary, not hidden)."""
    return not is_tmp_name(name) and not name.startswith((".", "_"))


def _names(items, limit: int = 3) -> str:
    items = list(items)
    return ", ".join(items[:limit]) + (f" (and {len(items) - limit} more)" if len(items) > limit else "")


def replica_problem(listing: list[tuple[str, int]] | None, *, files: list | None, size: int,
                    dirs: list[str] = ()) -> str | None:
    """What is wrong with a replica directory holding ``listing`` ((name, size); None: the
    directory is gone) and the sub-directories ``dirs``, against what the catalog recorded: the
    exact ``files`` ([name, size] pairs), or for a replica recorded without them (before 0.2) its
    total ``size`` and no temporary name. None when it is exactly right. Pure."""
    if listing is None:
        return "its directory is gone"
    have = dict(listing)
    problems = []
    if files is not None:
        want = {str(n): int(s) for n, s in files}
        missing = sorted(set(want) - set(have))
        short = sorted(n for n in want if n in have and have[n] != want[n])
        unknown = sorted(set(have) - set(want))
        if missing:
            problems.append(f"missing file{'s' if len(missing) > 1 else ''} {_names(missing)}")
        if short:
            problems.append("; ".join(f"file {n} holds {have[n]} bytes, the catalog recorded {want[n]}" for n in short[:3]))
    else:
        unknown = sorted(n for n in have if not is_data_name(n))
        total = sum(have.values())
        if total != size:
            problems.append(f"holds {total} bytes in {len(have)} files, the catalog recorded {size}")
    if unknown:
        kind = "a temporary copy" if any(is_tmp_name(n) for n in unknown) else "not committed"
        problems.append(f"unknown file{'s' if len(unknown) > 1 else ''} {_names(unknown)} ({kind})")
    if dirs:
        problems.append(f"unknown director{'ies' if len(dirs) > 1 else 'y'} {_names(sorted(dirs))}")
    return "; ".join(problems) or None


def check_replica(path: str, *, files: list | None, size: int) -> str | None:
    """List ``path`` and say what is wrong with it (see :func:`replica_problem`); None when exact."""
    try:
        listing, dirs = replica_entries(path)
    except FileNotFoundError:
        listing, dirs = None, []
    except Exception as exc:
        return f"cannot list it: {type(exc).__name__}: {exc}"[:500]
    return replica_problem(listing, files=files, size=size, dirs=dirs)
