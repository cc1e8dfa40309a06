"""SQLAlchemy models of the colocation catalog.

Only :mod:`airflow_colocate.catalog` imports this module: the rest of the package sees plain
dataclasses from :mod:`airflow_colocate.model.views`, so no session or lazy load leaks out.
The schema itself changes only through the migrations in ``catalog/migrations``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.expression import false

_UNSETTLED = "state IN ('staging', 'aborted', 'superseded')"
_LEAVING = "state IN ('dropping', 'deleting')"
_VERIFIED = "state = 'verified'"


class Base(DeclarativeBase):
    pass


class Database(Base):
    __tablename__ = "databases"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Backend(Base):
    __tablename__ = "backends"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    root_uri: Mapped[str] = mapped_column(String(1024), unique=True)
    host: Mapped[str] = mapped_column(String(255))
    capacity_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # alive | down | decommissioning | decommissioned
    state: Mapped[str] = mapped_column(String(32))
    state_since: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_heartbeat: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # Who set the state: "probe: <error>" or "admin: <reason>"; the probe never overrides an admin.
    state_reason: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    # The token of the identity marker at the root (``storage/identity.py``); the probe requires it.
    # None for backends added before 0.2 (the probe warns until ``colocate backend reinit``).
    marker_token: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The replica id after which the probe's rotating sample of files resumes.
    sample_cursor: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # The last probe's own finding, whatever the state says (an admin's mark holds against the probe).
    last_probe_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_probe_ok: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    last_probe_detail: Mapped[str | None] = mapped_column(String(1024), nullable=True)


class ColocateGroup(Base):
    __tablename__ = "colocate_groups"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # NULL for a global group (name starts with __global__), which spans databases.
    db_id: Mapped[int | None] = mapped_column(ForeignKey("databases.id"), nullable=True)
    name: Mapped[str] = mapped_column(String(64))
    dist_col_types: Mapped[list] = mapped_column(JSON)
    bucket_num: Mapped[int] = mapped_column(Integer)
    replication_num: Mapped[int] = mapped_column(Integer)
    stable: Mapped[bool] = mapped_column(Boolean)
    unstable_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Bumped by every change of the map or membership: lets a planner detect that it raced.
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The last stability check: why the group is unstable, one dict per (table, partition, bucket,
    # backend) problem (capped), and when the check ran.
    unstable_detail: Mapped[list | None] = mapped_column(JSON, nullable=True)
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Bumped in the transaction of every change a stability check reads other than backend states
    # and balance jobs (a commit, a clone, a drop, a bad replica, a map switch, a table joining or
    # leaving): a check that finds the generation it saw last reuses its answer.
    generation: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # When ``stable`` last turned false (None while stable, or not yet checked since 0007).
    unstable_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # When its joins may stay bucketed (model.reasons.JoinPolicy): "stable" (the seeds' rule) or "readable".
    join_policy: Mapped[str] = mapped_column(String(16), default="stable", server_default=text("'stable'"))
    # The bucket count new versions are written with, a multiple k·N of ``bucket_num`` after a split
    # (bucket j lives in map entry j mod N); None: ``bucket_num``.
    layout_buckets: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Where the Iceberg metadata of a table created in the group goes: every table of the group is
    # published as an Iceberg table (``group alter --iceberg on``); None: off.
    iceberg_warehouse: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    __table_args__ = (
        Index("uq_group_db_name", "db_id", "name", unique=True, postgresql_where=text("db_id IS NOT NULL"),
              sqlite_where=text("db_id IS NOT NULL")),
        Index("uq_group_global_name", "name", unique=True, postgresql_where=text("db_id IS NULL"),
              sqlite_where=text("db_id IS NULL")),
    )


class BucketMap(Base):
    """Bucket seq -> ordered backend ids, one row per bucket of a group."""

    __tablename__ = "bucket_map"
    group_id: Mapped[int] = mapped_column(ForeignKey("colocate_groups.id", ondelete="CASCADE"), primary_key=True)
    bucket_seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    backend_ids: Mapped[list] = mapped_column(JSON)


class Table(Base):
    __tablename__ = "tables"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    db_id: Mapped[int] = mapped_column(ForeignKey("databases.id"))
    name: Mapped[str] = mapped_column(String(64))
    columns: Mapped[list] = mapped_column(JSON)  # [[name, type], ...]
    dist_cols: Mapped[list] = mapped_column(JSON)
    partition_cols: Mapped[list] = mapped_column(JSON)
    bucket_num: Mapped[int] = mapped_column(Integer)
    replication_num: Mapped[int] = mapped_column(Integer)
    group_id: Mapped[int | None] = mapped_column(ForeignKey("colocate_groups.id"), nullable=True)
    # normal | dropped
    state: Mapped[str] = mapped_column(String(16))
    dropped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The version of ``columns`` (one ``table_schemas`` row each); a change rewrites no file.
    schema_version: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    # Partitions whose value is a date older than this many days are dropped by the maintenance DAG.
    retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    __table_args__ = (
        Index("uq_table_live_name", "db_id", "name", unique=True, postgresql_where=text("state = 'normal'"),
              sqlite_where=text("state = 'normal'")),
    )


class Partition(Base):
    __tablename__ = "partitions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"))
    value: Mapped[str] = mapped_column(String(128))
    bucket_num: Mapped[int] = mapped_column(Integer)
    replication_num: Mapped[int] = mapped_column(Integer)
    visible_version: Mapped[int] = mapped_column(Integer)  # 0: nothing committed yet
    next_version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # A dropped partition (recycle bin): its visible version moves here and ``visible_version`` is 0,
    # so reads, stability, balance and verify no longer see it; recover moves it back.
    dropped_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    dropped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (
        UniqueConstraint("table_id", "value", name="uq_partition_value"),
        # The recycle bin's few rows, for purge and 'partition list --dropped'.
        Index("ix_partition_dropped", "dropped_at", postgresql_where=text("dropped_at IS NOT NULL"),
              sqlite_where=text("dropped_at IS NOT NULL")),
    )


class TableSchema(Base):
    """One row per schema version of a table: its columns then and the change that made it."""

    __tablename__ = "table_schemas"
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    columns: Mapped[list] = mapped_column(JSON)  # [[name, type], ...]
    # [{"op": "add" | "drop" | "widen", "column": name, "type": new type, "old": old type}, ...]; None: created
    change: Mapped[list | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class PartitionVersion(Base):
    __tablename__ = "partition_versions"
    partition_id: Mapped[int] = mapped_column(ForeignKey("partitions.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    # staging | committed | superseded | aborted
    state: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))  # overwrite | append
    base_version: Mapped[int] = mapped_column(Integer)  # the version an append builds on
    rows: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The write job that made this version: gc finds the directories it was granted without a scan.
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The bucket count this version's rows were bucketed by (a multiple of the partition's
    # ``bucket_num``: each replica directory holds one file per finer bucket); None: ``bucket_num``.
    layout_buckets: Mapped[int | None] = mapped_column(Integer, nullable=True)
    __table_args__ = (
        # gc looks for the few versions that are not committed or removed; the index holds only those.
        Index("ix_version_unsettled", "state", postgresql_where=text(_UNSETTLED), sqlite_where=text(_UNSETTLED)),
    )


class Replica(Base):
    """The files of one (table, partition, version, bucket) on one backend."""

    __tablename__ = "replicas"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"))
    partition_id: Mapped[int] = mapped_column(ForeignKey("partitions.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    bucket_seq: Mapped[int] = mapped_column(Integer)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id"))
    # staging | verified | bad | dropping (redundant, files kept until drop_after) | deleting
    state: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(2048))
    rows: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    checksum: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    verified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)  # last re-hash
    drop_after: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)  # dropping: grace end
    # [[name, size], ...] of every file, as reported by the write or clone; None before 0.2.
    files: Mapped[list | None] = mapped_column(JSON, nullable=True)
    # {name: ETag} of every file on an S3 API, tied to its SHA-256 when recorded (storage/s3.py):
    # a repair's copy from this replica is then proven by the copy's answer alone. None elsewhere.
    etags: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    __table_args__ = (
        UniqueConstraint("partition_id", "version", "bucket_seq", "backend_id", name="uq_replica"),
        Index("ix_replica_backend", "backend_id"),
        # A table's replicas by bucket and backend: purge, bulk drop marks, one bucket column's detail.
        Index("ix_replica_table", "table_id", "bucket_seq", "backend_id"),
        # The few replicas on their way out, for the drop loop (every other replica is verified).
        Index("ix_replica_leaving", "state", postgresql_where=text(_LEAVING), sqlite_where=text(_LEAVING)),
        # Verified replicas by when their bytes were last checked: the oldest unverified one (metrics).
        Index("ix_replica_checked", "verified_at", "created_at", postgresql_where=text(_VERIFIED),
              sqlite_where=text(_VERIFIED)),
    )


class BucketReplicas(Base):
    """Per (table, bucket seq, backend): the verified and bad replicas of the visible versions and
    the verified bytes, summed over every partition. Kept current by the transaction that changes a
    replica or flips a visible version (:mod:`airflow_colocate.catalog.summary`), so stability,
    loads and balance plans read buckets x backends rows, never years of replica rows."""

    __tablename__ = "bucket_replicas"
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"), primary_key=True)
    bucket_seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id", ondelete="CASCADE"), primary_key=True)
    verified: Mapped[int] = mapped_column(Integer)
    bytes: Mapped[int] = mapped_column(BigInteger)
    bad: Mapped[int] = mapped_column(Integer)


class BucketSize(Base):
    """Per (table, bucket seq): the bytes of one verified replica of each visible version's bucket,
    summed over partitions (what moving that bucket of that table copies)."""

    __tablename__ = "bucket_sizes"
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"), primary_key=True)
    bucket_seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    bytes: Mapped[int] = mapped_column(BigInteger)


class GroupCheck(Base):
    """The last computed stability answer of a group and a digest of what it read (the group's
    generation, its map, the states of the backends the map names, its running balance job)."""

    __tablename__ = "group_checks"
    group_id: Mapped[int] = mapped_column(ForeignKey("colocate_groups.id", ondelete="CASCADE"), primary_key=True)
    inputs: Mapped[str] = mapped_column(String(64))
    problems: Mapped[int] = mapped_column(Integer)
    reasons: Mapped[list] = mapped_column(JSON)
    computed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Job(Base):
    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))  # write | balance | relocate | repair | gc
    group_id: Mapped[int | None] = mapped_column(ForeignKey("colocate_groups.id", ondelete="SET NULL"), nullable=True)
    state: Mapped[str] = mapped_column(String(32))
    plan: Mapped[dict] = mapped_column(JSON)
    progress: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # A write whose staging directory gc has not removed yet (its plan names it).
    gc_pending: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    __table_args__ = (
        Index("ix_jobs_kind_state", "kind", "state"),
        Index("ix_jobs_gc_pending", "gc_pending", postgresql_where=text("gc_pending"), sqlite_where=text("gc_pending = 1")),
    )


class Flag(Base):
    __tablename__ = "flags"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Event(Base):
    """Append-only audit log, like Doris's edit log: one row per committed state change."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    kind: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(255))
    detail: Mapped[dict] = mapped_column(JSON)
    actor: Mapped[str] = mapped_column(String(128))


class CatalogInfo(Base):
    """One row: the catalog's own id, written into every backend's identity marker."""

    __tablename__ = "catalog_info"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uid: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class IcebergPublication(Base):
    """A table published as an Iceberg table (``colocate table alter T --iceberg on``): where, and
    how far its Iceberg metadata has followed our commits. The Iceberg commit runs after ours, so a
    lag is a state of its own here, with its reason, never a failed commit of ours."""

    __tablename__ = "iceberg_publications"
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    # The folder the table's Iceberg metadata is written under (its data files stay ours).
    warehouse: Mapped[str] = mapped_column(String(1024))
    namespace: Mapped[str] = mapped_column(String(64))
    # What the last successful publication named (iceberg.files.digest) and its snapshot.
    digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # partition -> digest of what the last recorded publication named there; None while one is in
    # flight (set before its Iceberg commit): the next publication then compares every partition.
    partition_digests: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The newest event (events.id) the last snapshot covers: a catch-up replays the table's events
    # after it, one snapshot each. None: not known (published before 0013, or publication was off).
    event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Since when, and why, the last attempt failed (None: the last attempt succeeded).
    lag_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    lag_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class IcebergPin(Base):
    """A replica directory a retained Iceberg snapshot may name: gc keeps it. Written BEFORE the
    Iceberg commit that names it (a pin for a commit that never happened only keeps files longer),
    and recomputed from the retained snapshots after an expiry."""

    __tablename__ = "iceberg_pins"
    path: Mapped[str] = mapped_column(String(2048), primary_key=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("tables.id", ondelete="CASCADE"), primary_key=True)


class CloneTarget(Base):
    """A new replica's directory a balance job is about to clone into, recorded before the copy
    starts. A clone killed before its registration, whose move a later plan no longer needs (the
    partition dropped, the map revised, the job cancelled), leaves files no replica row names;
    ``writes.garbage`` returns them once the job has ended, as Doris drops a clone task's replica
    when the task fails. ``removing``: gc is deleting it, and no balance clones there meanwhile."""

    __tablename__ = "clone_targets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(Integer)  # no foreign key: a job's row gone must not hide its files
    partition_id: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    bucket_seq: Mapped[int] = mapped_column(Integer)
    backend_id: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(String(2048))
    state: Mapped[str] = mapped_column(String(16))  # planned | removing
    claimed_by: Mapped[str | None] = mapped_column(String(32), nullable=True)  # the gc run removing it
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        Index("ix_clone_targets_job", "job_id"),
        Index("ix_clone_targets_path", "path"),
        Index("ix_clone_targets_removing", "state", postgresql_where=text("state = 'removing'"),
              sqlite_where=text("state = 'removing'")),
    )
