"""Plain, detached snapshots of catalog rows handed to the rest of the package."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from airflow_colocate.core.times import utc


REASON_SOURCES = ("admin", "probe")


def split_reason(stored: str | None) -> tuple[str | None, str | None]:
    """``backends.state_reason`` as stored (``"admin: disk pulled"``, ``"probe: <error>"``, ``"admin"``
    for a mark without a reason, ``"drained"``) -> (the reason as given, who set it). A person reads
    the reason the operator typed, not who typed it: that is the event's actor."""
    if not stored:
        return None, None
    head, sep, rest = stored.partition(": ")
    if head in REASON_SOURCES and sep:
        rest = rest.strip()
        # the defaults marks wrote before 0.3 ("admin: admin", "admin: marked down") are no reason
        return (None if head == "admin" and rest in ("admin", "marked down", "marked alive") else rest or None), head
    if stored in REASON_SOURCES:
        return None, stored
    return stored, None


def reason_line(reason: str | None, source: str | None) -> str | None:
    """The reason with who gave it, for one line of text: ``admin: disk pulled``."""
    if source and reason:
        return f"{source}: {reason}"
    return reason or (f"{source}: no reason given" if source else None)


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
    state_reason: str | None = None  # the reason as given ("disk pulled"); None when none was given
    reason_source: str | None = None  # who set the state: "admin" (mark-down/up), "probe", None (other)
    # The last probe's own finding, whatever the state says (an admin's mark holds against the probe).
    last_probe_at: datetime | None = None
    last_probe_ok: bool | None = None
    last_probe_detail: str | None = None

    @property
    def reason_line(self) -> str | None:
        """``admin: disk pulled`` / ``probe: no answer within 20s`` / ``admin: no reason given``."""
        return reason_line(self.state_reason, self.reason_source)

    def state_fields(self) -> dict:
        """What the API and the page show about a backend's state, under the names both use."""
        return {"state": self.state, "state_reason": self.state_reason, "reason_source": self.reason_source,
                "state_since": self.state_since, "last_heartbeat": self.last_heartbeat,
                "last_probe_at": self.last_probe_at, "last_probe_ok": self.last_probe_ok,
                "last_probe_detail": self.last_probe_detail}


@dataclass(frozen=True)
class RootChange:
    """What ``Backends.set_root`` did: the backend as it is now, the root it left, and how many
    replica paths moved with it (0 and ``changed`` false when it was already at that root)."""

    backend: BackendView
    old_root: str
    replicas: int
    changed: bool


def group_ref(db_id: int | None, grp_id: int) -> str:
    """``dbId.grpId`` as Doris prints it (0 for a global group's database)."""
    return f"{db_id or 0}.{grp_id}"


def group_full_name(db_id: int | None, name: str) -> str:
    """``dbId_groupName``; a global group's full name is its name."""
    return f"{db_id}_{name}" if db_id else name


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
    join_policy: str = "stable"  # model.reasons.JoinPolicy: when its joins may stay bucketed
    # After a split: the bucket count new versions are written with (k·bucket_num); 0: bucket_num.
    layout_buckets: int = 0

    @property
    def layout(self) -> int:
        """The bucket count the group's next write uses; joins still run at ``bucket_num``, the
        map's count, because bucket j of a finer layout lives in map entry j mod bucket_num."""
        return self.layout_buckets or self.bucket_num

    @property
    def group_id(self) -> str:
        return group_ref(self.db_id, self.grp_id)

    @property
    def full_name(self) -> str:
        return group_full_name(self.db_id, self.name)


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
    schema_version: int = 1
    retention_days: int | None = None  # partitions dated older than this are dropped by maintenance

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
    dropped_version: int | None = None  # in the recycle bin: the version recover makes visible again
    dropped_at: datetime | None = None


@dataclass(frozen=True)
class SchemaVersionView:
    table_id: int
    version: int
    columns: tuple[tuple[str, str], ...]
    change: tuple[dict, ...]  # empty for the version the table was created with
    created_at: datetime


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
    """What a write may do, as the catalog granted it in :meth:`Writes.begin` (``catalog.writes.begin``)."""

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
    # bucket seq -> for each target: ((name, size), ...) recorded for its base replica (None before 0.2)
    base_files: tuple = ()
    # The bucket count the rows are bucketed by (a multiple of len(targets) after a split: bucket j's
    # file goes to the replica directory of bucket j mod len(targets)); 0: len(targets).
    layout_buckets: int = 0


@dataclass(frozen=True)
class ReplicaView:
    bucket_seq: int
    backend_id: int
    path: str
    rows: int
    bytes: int
    checksum: str
    state: str
    id: int = 0
    # ((name, size), ...) as the write or clone reported them; None for a replica recorded before 0.2
    files: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class PartitionReplicas:
    """The visible version of one partition and its verified replicas per bucket."""

    value: str
    version: int
    buckets: tuple[tuple[ReplicaView, ...], ...]
    layout_buckets: int = 0  # the version's finer layout after a group split (0: len(buckets))


@dataclass(frozen=True)
class GarbageItem:
    """Files that no visible version needs any more, and the rows to forget once they are gone."""

    reason: str
    uri: str
    partition_id: int | None = None
    version: int | None = None
    job_id: int | None = None
    target_id: int | None = None  # an abandoned clone's row in clone_targets
    claim: str | None = None  # and the gc run's token that marked it removing (none in a dry run)


# ---------------------------------------------------------------------- health and balance jobs

DEFAULT_RELOCATE_DELAY = timedelta(minutes=30)


DEFAULT_GRACE = timedelta(minutes=10)


MAX_REASONS = 50


BALANCE_KINDS = ("relocate", "balance", "repair")


ACTIVE = "running"


# Steps of a balance job, in order; ``progress.step`` is the last one reached.
STEPS = ("planned", "unstable", "switched", "finished")


@dataclass(frozen=True)
class BackendHealth:
    id: int
    name: str
    root_uri: str
    host: str
    capacity_bytes: int | None
    state: str  # alive | down | decommissioning | decommissioned
    state_since: datetime
    last_heartbeat: datetime | None
    state_reason: str | None  # the reason as given, as on BackendView
    unavailable: bool  # placement must replace it (decommissioning, or down longer than the delay)
    reason_source: str | None = None  # "admin", "probe" or None, as on BackendView
    last_probe_at: datetime | None = None
    last_probe_ok: bool | None = None
    last_probe_detail: str | None = None

    @property
    def reason_line(self) -> str | None:
        return reason_line(self.state_reason, self.reason_source)

    @property
    def alive(self) -> bool:
        return self.state == "alive"

    @property
    def transiently_down(self) -> bool:
        return self.state == "down" and not self.unavailable


@dataclass(frozen=True)
class Reason:
    """One reason a group is not stable. ``table``..``backend`` are empty when it is not about one
    replica (a backend that is down, a job that is running)."""

    problem: str
    table: str = ""
    partition: str = ""
    version: int = 0
    bucket: int = -1
    backend: str = ""

    @property
    def text(self) -> str:
        if not self.table:
            return self.problem
        return f"{self.table}/{self.partition} v{self.version} bucket {self.bucket} on backend {self.backend}: {self.problem}"


@dataclass(frozen=True)
class GroupHealth:
    group_id: str  # dbId.grpId
    full_name: str
    stable: bool
    reasons: tuple[Reason, ...]
    problems: int  # all problems found; ``reasons`` keeps the first MAX_REASONS
    checked_at: datetime
    changed: bool = False  # the check flipped the stable flag or changed the reason
    reused: bool = False  # nothing the last computation read had changed: its answer was reused

    @property
    def reason(self) -> str | None:
        return summary(self.reasons, self.problems)

    def to_dict(self) -> dict:
        return {"group": self.full_name, "group_id": self.group_id, "stable": self.stable, "reason": self.reason,
                "reasons": [r.text for r in self.reasons], "problems": self.problems,
                "checked_at": self.checked_at.isoformat()}


@dataclass(frozen=True)
class GroupSnapshot:
    """What the balance planner needs to know about one group."""

    grp_id: int
    group_id: str
    full_name: str
    bucket_num: int
    replication_num: int
    bucket_map: tuple[tuple[int, ...], ...]
    bucket_bytes: tuple[int, ...]  # bytes of one replica of each bucket, summed over tables and partitions
    active_job: int | None
    repairs: int  # (table, partition, bucket, backend) of the map with no verified replica, backend alive
    redundant: int  # replicas of visible versions on backends the map does not name


@dataclass(frozen=True)
class ClusterSnapshot:
    now: datetime
    relocate_delay: timedelta
    backends: tuple[BackendHealth, ...]
    groups: tuple[GroupSnapshot, ...]
    other_bytes: dict[int, int]  # backend id -> bytes of visible replicas of tables in no group
    flags: dict[str, bool]


@dataclass(frozen=True)
class CloneNeed:
    """One replica a balance job still has to clone: ``path`` on backend ``backend_id`` from one of
    ``sources`` ((backend id, replica dir), best first), to end up with ``checksum``."""

    table: str
    table_id: int
    partition_id: int
    partition: str
    version: int
    bucket_seq: int
    backend_id: int
    path: str
    checksum: str
    rows: int
    bytes: int
    sources: tuple[tuple[int, str], ...]
    repair: str  # missing | bad
    # ((name, size), ...) of the replica the clone copies (the catalog's files; None before 0.2)
    files: tuple[tuple[str, int], ...] | None = None
    root: str | None = None  # the target backend's root: the clone stages its copies in its tmp area
    fresh: bool = False  # no row at the replica's key yet: a new replica (CloneTask.fresh)
    # ((source backend id, {name: ETag}), ...): the sources' ETags the catalog recorded (S3 API)
    etags: tuple[tuple[int, dict], ...] = ()


@dataclass(frozen=True)
class Blocked:
    """A replica a job cannot clone now, and why (target not alive, no healthy source, ...)."""

    table: str
    partition: str
    bucket_seq: int
    backend_id: int
    why: str
    target_down: bool = False


@dataclass(frozen=True)
class JobView:
    """A job of any kind (write, relocate, balance, repair, gc) as every reader sees it."""

    id: int
    kind: str
    state: str  # balance jobs: running | done | cancelled; writes: running | committed | failed
    grp_id: int | None
    group: str  # the group's full name (or the name the plan recorded), "" for none
    step: str  # a balance job's step, "" for other kinds
    plan: dict
    progress: dict
    created_at: datetime
    updated_at: datetime
    group_id: str | None = None  # dbId.grpId
    subject: str | None = None  # a write's ``db.table/partition vN``


@dataclass(frozen=True)
class SwitchResult:
    switched: bool
    cancelled: bool = False
    missing: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class FinishResult:
    done: bool
    health: GroupHealth | None = None
    dropping: int = 0
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class DropItem:
    replica_id: int
    backend_id: int
    path: str


@dataclass(frozen=True)
class VerifyNeed:
    replica_id: int
    backend_id: int
    path: str
    checksum: str
    bytes: int
    table_id: int = 0
    partition: str = ""  # the partition's value
    bucket_seq: int = 0
    rows: int = 0
    layout_buckets: int = 0  # the version's finer layout after a group split (0: the partition's count)


def is_unavailable(state: str, state_since: datetime | None, now: datetime, delay: timedelta) -> bool:
    if state in ("decommissioning", "decommissioned"):
        return True
    return state == "down" and state_since is not None and now - utc(state_since) >= delay


def summary(reasons: Sequence[Reason], problems: int) -> str | None:
    if not reasons:
        return None
    more = problems - 1
    return reasons[0].text + (f" (and {more} more problem{'s' if more != 1 else ''})" if more > 0 else "")


@dataclass(frozen=True)
class SampledReplica:
    """One replica the probe checks this run: its recorded files must all be there, no more."""

    replica_id: int
    table: str
    partition: str
    bucket_seq: int
    backend_id: int
    path: str
    bytes: int
    files: list[tuple[str, int]] | None  # None: written before 0.2, checked by total bytes


@dataclass(frozen=True)
class IcebergPublicationView:
    """A table's Iceberg publication: where, what was published last, and whether it lags (why)."""

    table_id: int
    table: str  # db.table
    enabled: bool
    warehouse: str
    namespace: str
    digest: str | None
    snapshot_id: int | None
    published_at: datetime | None
    lag_since: datetime | None
    lag_reason: str | None
    event_id: int | None = None  # the newest event of ours the last snapshot covers

    @property
    def location(self) -> str:
        """The Iceberg table's own folder (metadata only: the data files stay in the replicas)."""
        return f"{self.warehouse.rstrip('/')}/{self.namespace}/{self.table.rpartition('.')[2]}_{self.table_id}"
