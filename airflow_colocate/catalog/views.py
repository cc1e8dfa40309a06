"""Plain, detached snapshots of catalog rows handed to the rest of the package."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class BackendView:
    id: int
    name: str
    root_uri: str
    host: str
    capacity_bytes: int | None
    state: str
    state_since: datetime
    last_heartbeat: datetime | None


@dataclass(frozen=True)
class GroupView:
    db_id: int  # 0 for a global group
    grp_id: int
    name: str
    dist_col_types: tuple[str, ...]
    bucket_num: int
    replication_num: int
    stable: bool
    unstable_reason: str | None
    version: int
    table_ids: tuple[int, ...] = ()
    bucket_map: tuple[tuple[int, ...], ...] = field(default=(), repr=False)

    @property
    def group_id(self) -> str:
        """``dbId.grpId`` as Doris prints it."""
        return f"{self.db_id}.{self.grp_id}"

    @property
    def full_name(self) -> str:
        """``dbId_groupName``; a global group's full name is its name."""
        return self.name if self.db_id == 0 else f"{self.db_id}_{self.name}"


@dataclass(frozen=True)
class TableView:
    id: int
    db: str
    name: str
    columns: tuple[tuple[str, str], ...]
    dist_cols: tuple[str, ...]
    partition_cols: tuple[str, ...]
    bucket_num: int
    replication_num: int
    group_id: str | None
    group_name: str | None
    state: str
    dropped_at: datetime | None

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"


@dataclass(frozen=True)
class PartitionView:
    id: int
    table_id: int
    value: str
    bucket_num: int
    replication_num: int
    visible_version: int


@dataclass(frozen=True)
class EventView:
    id: int
    ts: datetime
    kind: str
    subject: str
    detail: dict
    actor: str


@dataclass(frozen=True)
class WriteTicket:
    """What a write may do, as the catalog granted it in :meth:`Catalog.begin_write`."""

    job_id: int
    table: TableView
    partition_id: int
    partition_value: str
    version: int
    base_version: int  # append: the version the new one extends; overwrite: 0
    mode: str
    # bucket seq -> [(backend id, backend root)], first = primary; only alive mapped backends
    targets: tuple[tuple[tuple[int, str], ...], ...]
    # bucket seq -> for each target: the base version's replica dir to carry over ('' if none)
    base_paths: tuple[tuple[str, ...], ...]
    missing: tuple[str, ...]  # mapped replicas skipped because their backend is not alive


@dataclass(frozen=True)
class ReplicaView:
    bucket_seq: int
    backend_id: int
    path: str
    rows: int
    bytes: int
    checksum: str
    state: str


@dataclass(frozen=True)
class PartitionReplicas:
    """The visible version of one partition and its verified replicas per bucket."""

    value: str
    version: int
    buckets: tuple[tuple[ReplicaView, ...], ...]


@dataclass(frozen=True)
class GarbageItem:
    """Files that no visible version needs any more, and the rows to forget once they are gone."""

    reason: str
    uri: str
    partition_id: int | None = None
    version: int | None = None
    job_id: int | None = None
