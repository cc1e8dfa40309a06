"""The JSON contract between the control plane (Airflow task, CLI) and the Spark jobs.

A Spark job gets a plan with exact input and output locations and returns a report; it never sees
the catalog. Plans and reports are dataclasses so that both sides are checked by the same code.
This module is the bottom of the package (standard library only), because every layer speaks it:
the catalog records reports, storage places what a plan says, the planner builds plans, Spark runs them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, get_args, get_origin, get_type_hints


def _build(cls, data):
    """Rebuild nested dataclasses from parsed JSON."""
    if is_dataclass(cls) and isinstance(data, dict):
        hints = get_type_hints(cls)
        names = {f.name for f in fields(cls)}
        return cls(**{k: _build(hints[k], v) for k, v in data.items() if k in names})
    origin = get_origin(cls)
    if origin in (list, tuple) and isinstance(data, list):
        (inner, *_) = get_args(cls) or (Any,)
        return [_build(inner, v) for v in data]
    if origin is dict and isinstance(data, dict):
        _, inner = get_args(cls) or (Any, Any)
        return {k: _build(inner, v) for k, v in data.items()}
    if origin is not None and type(None) in get_args(cls):  # Optional[X] / X | None
        inner = next(a for a in get_args(cls) if a is not type(None))
        return None if data is None else _build(inner, data)
    return data


class JsonMixin:
    """JSON text only: files are :mod:`airflow_colocate.storage.plan_files`' business, so a plan
    written to ``hdfs://`` is never squeezed through a local path here."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str):
        return _build(cls, json.loads(text))


# ---------------------------------------------------------------------- targets


@dataclass
class ReplicaTarget:
    """Where one replica of one bucket goes: the directory that will hold its files."""

    backend_id: int
    path: str  # URI of the replica directory, e.g. file:///data/be1/default/orders/2026-11-01/v3/b00005


@dataclass
class BucketTarget:
    bucket_seq: int
    replicas: list[ReplicaTarget]  # first = primary (written by Spark), others = verified byte copies
    # For append: the replica directories of the base version on the same backends (same order),
    # whose files are carried into the new version.
    base_paths: list[str] = field(default_factory=list)
    # For append: [[name, size], ...] the catalog recorded for each base directory (None: before
    # 0.2); a base directory that does not hold exactly these is not carried.
    base_files: list[list[list] | None] = field(default_factory=list)


@dataclass
class Source:
    """Either ``path`` + ``format`` (+ reader ``options``) or a Spark SQL ``query`` over ``tables``."""

    format: str | None = None  # parquet | csv | json | orc
    path: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    query: str | None = None
    tables: list["ReadTable"] = field(default_factory=list)


@dataclass
class WritePlan(JsonMixin):
    job_id: str
    table: str  # db.table, for messages
    columns: list[list[str]]  # [[name, spark sql type], ...] including partition columns
    dist_cols: list[str]
    partition_cols: list[str]
    partition_value: str
    bucket_num: int
    mode: str  # overwrite | append
    version: int
    source: Source
    buckets: list[BucketTarget]
    staging_uri: str  # a directory for Spark's raw output, removed by the job when done
    report_uri: str  # where the job writes its WriteReport
    kind: str = "write"
    # schema_evolution="add_columns": a source column the table lacks is written too (after the
    # table's columns) and reported in WriteReport.added_columns, which the commit adds first.
    add_columns: bool = False
    layout_buckets: int = 0  # after a group split: bucket by this multiple, finer j's file into bucket j mod n


@dataclass
class ReplicaReport:
    bucket_seq: int
    backend_id: int
    path: str
    files: list[str]  # file names inside path
    rows: int
    bytes: int
    checksum: str  # sha256 over the sorted (name, sha256(file)) pairs: equal for byte-identical replicas
    # name -> bytes of every file in ``files``: recorded and checked on read (before 0.2: ``bytes`` only)
    sizes: dict[str, int] = field(default_factory=dict)
    etags: dict[str, str] = field(default_factory=dict)  # name -> ETag on an S3 API (storage/s3.py)


@dataclass
class WriteReport(JsonMixin):
    job_id: str
    table: str
    partition_value: str
    version: int
    source_rows: int
    replicas: list[ReplicaReport]
    seconds: float
    spark_version: str
    kind: str = "write"
    added_columns: list[list[str]] = field(default_factory=list)  # [[name, type], ...] new to the table


# ---------------------------------------------------------------------- reads


@dataclass
class ReadReplica:
    """One replica a read may register for a bucket, with what the catalog recorded of it: the
    Spark side registers it only if its directory holds exactly these files."""

    replica_id: int
    backend_id: int
    path: str
    bytes: int
    files: list[list] | None = None  # [[name, size], ...]; None: recorded before 0.2, checked by bytes
    rows: int = 0  # the catalog's row count (with bytes, what the hash-join choice estimates from)
    # the catalog's replica checksum (storage.replica_dir.replica_checksum): what a registered
    # table's retried task proves a replica's bytes against before reading it (spark.replica_paths)
    checksum: str = ""


@dataclass
class ReadPartition:
    value: str
    # bucket seq -> the replica directory chosen for this read (same backend for every table of a
    # colocated join); an empty string means the bucket has no rows.
    bucket_paths: list[str]
    # bucket seq -> the replicas the read may use, in preference order (the first is bucket_paths'
    # choice): each is checked against its files before it is registered, the next one used if it
    # is not exact. Empty (a plan from before 0.2, a test): bucket_paths are registered unchecked.
    candidates: list[list[ReadReplica]] = field(default_factory=list)
    layout_buckets: int = 0  # a split version's count: bucket b's directory holds finer b, b+n, ... (0: n)


@dataclass
class ReadTable:
    """How to register one catalog table in a Spark session."""

    name: str  # the name queries use, e.g. orders
    columns: list[list[str]]
    dist_cols: list[str]
    partition_cols: list[str]
    bucket_num: int
    partitions: list[ReadPartition]
    bucketed: bool = True  # False: registered without a bucket spec (the fallback)
    table: str = ""  # db.table, for messages
    # Check on read that every row's pmod(hash(dist cols), n) is its bucket and verify parquet page
    # checksums: a file with another bucket's rows or a flipped byte fails the query, never a wrong row.
    bucket_guard: bool = True
    # Register with a SHUFFLE_HASH hint: a join may build a hash map of this table's bucket (the join job
    # sets it on the tables whose every bucket fits the hash budget, spark.bucket_join.choose_bucket_join).
    hash_build: bool = False
    read_buckets: int = 0  # read coalesced to n (a group created at k·n joined with one of n), 0: bucket_num


@dataclass
class BadReplica:
    """A replica a read found not to hold exactly the files the catalog recorded: the control
    plane marks it ``bad`` (and its group unstable) so no read chooses it and balance repairs it."""

    replica_id: int
    table: str  # db.table
    partition: str
    bucket_seq: int
    backend_id: int
    path: str
    reason: str


# ---------------------------------------------------------------------- joins


@dataclass
class BucketFacts:
    """What the catalog's sizes and file lists say of a join's bucketed reads, worked out before the
    job is submitted (planner.join.bucket_facts); the job weighs them against the executors' memory
    and the query's shape, which only the running Spark knows (spark.bucket_join). A plan without
    them (older) reads as no table known: the sort-merge join, which is always right."""

    largest_bucket: dict[str, int] = field(default_factory=dict)  # bucketed table -> its largest bucket, in memory (bytes)
    unsized: list[str] = field(default_factory=list)  # bucketed tables whose plan carries no bucket sizes
    one_file_per_bucket: bool = False  # every bucket read is one file per partition (its files may be read in order)
    read_orders: list[list[str]] = field(default_factory=list)  # the column orders the buckets are read in


@dataclass
class JoinPlan(JsonMixin):
    """A query over registered catalog tables, and where its result goes."""

    job_id: str
    query: str
    tables: list[ReadTable]
    # alias -> why the table is registered without its bucket spec ('' when it is bucketed)
    reasons: dict[str, str]
    groups: dict[str, str]  # alias -> group id ('' when none); one group's sides may join without shuffle
    require_colocate: bool
    report_uri: str
    output_path: str | None = None  # write the result as parquet here, or
    output: WritePlan | None = None  # into a catalog table (maybe in the same group)
    preview_rows: int = 20
    kind: str = "join"
    # local backend root URI -> its host (catalog backends): the job reads each replica from there
    # when the locality jar is present (spark.locality), so its bucket task runs on that host
    backend_hosts: dict[str, str] = field(default_factory=dict)
    # Memory budget (bytes) of one bucket's hash-join build side; None: derived from the job's Spark
    # conf (spark.colocate.join.hashBudget, else spark.bucket_join.default_hash_budget); 0: sort-merge only.
    hash_budget: int | None = None
    read_notes: list[str] = field(default_factory=list)
    bucket_facts: BucketFacts = field(default_factory=BucketFacts)
    # Lines the explain adds about the bucket reads (an unstable group read bucketed, split layouts);
    # bucket_peers: group id -> the group it joins bucket by bucket (one map count, key types: planner.reads).
    bucket_peers: dict[str, str] = field(default_factory=dict)


@dataclass
class BucketJoin:
    """How the colocated joins join inside a bucket, and why (spark.bucket_join.choose_bucket_join)."""

    method: str  # "hash" (the hinted tables fit the budget) or "sort-merge"
    budget: int  # bytes one task may give one bucket's build side
    budget_from: str  # where the budget came from (the conf, the operator, the formula)
    largest_bucket: dict[str, int]  # bucketed table -> its largest bucket, estimated in memory (bytes)
    build_tables: list[str]  # tables hinted SHUFFLE_HASH (every bucket fits), smallest first
    reason: str  # e.g. "largest build bucket 41 MiB of 512 MiB budget"


@dataclass
class JoinExplain:
    """One join node of the executed physical plan."""

    join: str  # e.g. "SortMergeJoin Inner [o_orderkey#1L], [l_orderkey#7L]"
    left_tables: list[str]
    right_tables: list[str]
    exchanges_left: int
    exchanges_right: int
    colocate: bool  # what Spark did: no Exchange feeds the join
    reason: str | None
    planned: bool = False  # what the planner predicted from the registration and the join keys
    kind: str = "inner"  # inner, left, right, full, semi, anti (spark.physical_plan.JOIN_KINDS)
    keys: list[str] = field(default_factory=list)  # equality keys by name: "o.o_orderkey = l.l_orderkey"
    method: str = ""  # what Spark did: "hash", "sort-merge", "broadcast" or another join node
    build_tables: list[str] = field(default_factory=list)  # a hash join's build side


@dataclass
class JoinLocality:
    """Where a join job's input tasks ran (Spark's status API; spark.locality.measure)."""

    tasks: int = 0  # tasks that read input
    node_local: int = 0  # of them, NODE_LOCAL (Spark says PROCESS_LOCAL for a task with no preferred host)
    levels: dict[str, int] = field(default_factory=dict)  # Spark's taskLocality -> tasks
    bytes_read: int = 0
    bytes_remote: int = 0  # read by a task not on the host of the backend it read
    note: str = ""  # why locality was off, or why figures are missing


@dataclass
class JoinReport(JsonMixin):
    job_id: str
    rows: int
    joins: list[JoinExplain]
    explain: str  # one line per join: "colocate: true" or "colocate: false, reason: ..."
    physical_plan: str
    seconds: float
    write: WriteReport | None = None
    preview: list[dict] = field(default_factory=list)
    kind: str = "join"
    bad_replicas: list[BadReplica] = field(default_factory=list)  # found (and not read) while registering
    locality: JoinLocality | None = None  # where the bucket tasks ran (None: not measured)
    bucket_join: BucketJoin | None = None  # the hash-join choice (None: no table read bucketed)
    # seconds per phase: register (check the replicas, register them), plan (Spark plans the query
    # and the explain is built), run (execute into the output, read the preview back)
    phases: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------- clones (repair, balance)


@dataclass
class CloneTask:
    """Copy one replica directory (every data file of one (table, partition, version, bucket)) from
    ``src`` on backend ``src_backend_id`` to ``dst`` on backend ``backend_id``. The copy must hash
    to ``checksum`` (the replica checksum over its files' sha256) and hold ``bytes`` bytes; a file
    listed in ``files`` must also have that sha256."""

    key: str  # "<partition id>:<version>:<bucket>:<backend id>", unique in a plan
    table: str  # db.table, for messages
    partition_id: int
    partition: str
    version: int
    bucket_seq: int
    backend_id: int
    src_backend_id: int
    src: str
    dst: str
    checksum: str
    bytes: int
    rows: int
    files: dict[str, str] = field(default_factory=dict)
    # name -> bytes of each file recorded for the source: only these are copied (empty: before 0.2, its data files)
    sizes: dict[str, int] = field(default_factory=dict)
    root: str | None = None  # the destination backend's root: copies are staged in its tmp area
    fresh: bool = False  # no row names ``dst``: a directory the clone makes is unread until registered (written in place)
    etags: dict[str, str] = field(default_factory=dict)  # name -> the source's recorded ETag (storage/s3.py)


@dataclass
class VerifyTask:
    """Re-hash one replica's files and compare with its recorded checksum and size."""

    replica_id: int
    backend_id: int
    path: str
    checksum: str
    bytes: int


@dataclass
class ClonePlan(JsonMixin):
    job_id: str
    copies: list[CloneTask]
    report_uri: str
    verifies: list[VerifyTask] = field(default_factory=list)
    kind: str = "clone"


@dataclass
class CloneResult:
    key: str
    partition_id: int
    version: int
    bucket_seq: int
    backend_id: int
    src_backend_id: int
    path: str
    ok: bool
    rows: int = 0
    bytes: int = 0
    checksum: str = ""
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    source_bad: bool = False  # the bytes read from the source do not match the catalog: the source is corrupt
    error: str | None = None
    sizes: dict[str, int] = field(default_factory=dict)  # name -> bytes of every file in ``files``
    # the source holds files the catalog does not list (a killed copy's): only the catalog's were copied, the source is bad
    source_problem: str | None = None
    etags: dict[str, str] | None = None  # name -> the copy's ETag, for each file, on an S3 API


@dataclass
class VerifyResult:
    replica_id: int
    ok: bool
    bytes: int = 0
    checksum: str = ""
    error: str | None = None


@dataclass
class CloneReport(JsonMixin):
    job_id: str
    copies: list[CloneResult]
    verifies: list[VerifyResult]
    seconds: float
    bytes: int  # bytes copied by successful clones
    spark_version: str
    kind: str = "clone"


# ---------------------------------------------------------------------- verify (colocate verify)


@dataclass
class RowCheck:
    """Re-compute the bucket of every row of one replica: each must hash to ``bucket_seq``, and
    the replica must hold the ``rows`` the catalog recorded."""

    replica_id: int
    path: str
    partition: str
    bucket_seq: int
    rows: int
    layout_buckets: int = 0  # a split version's layout: each file's rows hash to the finer bucket it names


@dataclass
class RowCheckTable:
    """The replicas of one table whose rows are checked, in one Spark job."""

    table: str  # db.table, for messages
    columns: list[list[str]]  # the distribution columns as the files store them: [[name, spark sql type], ...]
    bucket_num: int
    replicas: list[RowCheck]


@dataclass
class VerifyPlan(JsonMixin):
    """Prove replicas: re-hash their files against the catalog's checksums (``hashes``, the clone
    job's verify tasks) and re-compute every row's bucket (``tables``)."""

    job_id: str
    hashes: list[VerifyTask]
    tables: list[RowCheckTable]
    report_uri: str
    kind: str = "verify"


@dataclass
class RowCheckResult:
    replica_id: int
    ok: bool
    rows: int = 0  # rows read
    wrong: int = 0  # rows whose pmod(hash(dist cols), n) is not the replica's bucket
    error: str | None = None


@dataclass
class VerifyReport(JsonMixin):
    job_id: str
    hashes: list[VerifyResult]
    rows: list[RowCheckResult]
    seconds: float
    bytes: int  # bytes re-hashed
    spark_version: str
    kind: str = "verify"


# ---------------------------------------------------------------------- bulk import


# An import is one WritePlan per partition (each its own new version, planned in the catalog like any
# write) plus what the one Spark job needs to read them all at once: the dataset root and the partition
# folders. The job reports each partition on its own (a WriteReport, or the reason it failed), so the
# control plane commits every partition whose files were placed and verified and leaves the others
# uncommitted.


@dataclass
class ImportPartition:
    value: str  # the partition value, as the catalog names it
    folder: str  # URI of its source folder, e.g. file:///landing/orders/dt=2026-11-01
    plan: WritePlan


@dataclass
class ImportPlan(JsonMixin):
    job_id: str
    table: str  # db.table, for messages
    root: str  # the dataset root holding the <partition column>=<value> folders
    format: str  # parquet | orc
    partition_col: str
    partitions: list[ImportPartition]
    staging_uri: str  # Spark's raw output for every partition, removed by the job when done
    report_uri: str  # the ImportReport; each placed partition also gets <report dir>/parts/<n>.json
    kind: str = "import"

    def part_report_uri(self, index: int) -> str:
        """Where the job writes partition ``index``'s report as soon as it is placed, so a killed
        job's finished partitions can still be committed."""
        return f"{self.report_uri.rsplit('/', 1)[0]}/parts/{index:06d}.json"


@dataclass
class ImportReport(JsonMixin):
    job_id: str
    table: str
    reports: list[WriteReport]  # the partitions placed and verified, in plan order
    failed: dict[str, str] = field(default_factory=dict)  # partition value -> why it was not placed
    seconds: float = 0.0
    spark_version: str = ""
    kind: str = "import"
