"""A write that ran out of space, said as one line naming where: a bare ``[Errno 28]`` names no
disk, and the person reading it must know which backend (or work dir) to free."""

from __future__ import annotations

import errno

from airflow_colocate.core.errors import StorageFull


def no_space(exc: BaseException, where: str, what: str) -> StorageFull | None:
    """``exc`` as :class:`StorageFull` when it is ENOSPC or a full quota, else None."""
    if not isinstance(exc, OSError) or isinstance(exc, StorageFull) or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    full = StorageFull(f"no space left on device under {where}: {what} failed ({exc.strerror})")
    full.__cause__ = exc
    return full
