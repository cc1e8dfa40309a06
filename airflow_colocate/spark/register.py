"""Register catalog tables in a Spark session so ``spark.sql`` can read (and join) them.

A bucketed table becomes a hidden backing table ``colocate_registered.__cl_<name>``::

    CREATE TABLE `colocate_registered`.`__cl_orders` (<columns>, `__bucket` INT) USING parquet
      PARTITIONED BY (<partition column>, `__bucket`)
      CLUSTERED BY (<distribution columns>) INTO <n> BUCKETS
      LOCATION '<an empty directory>'

in a database of its own (:data:`DATABASE`, created with a LOCATION under a temporary directory,
never the user's current database), with one catalog partition per (partition value, bucket) whose LOCATION is the replica directory
chosen for that bucket (all added by ONE ``ALTER TABLE … ADD PARTITION … PARTITION …`` statement),
and a temporary view ``orders`` that selects the table's columns, so nobody sees ``__bucket``, and
(``bucket_guard``, the default) checks every row's bucket (:func:`bucket_guard`) and every parquet
page's checksum as it reads (classic sessions: a DataFrame view over the listed partitions, spark.listed_views).
Spark's bucketed scan then reports ``HashPartitioning(dist cols, n)`` and a join of two such
tables on the bucket key plans no Exchange. ``bucketed=False`` (the fallback for an unstable
group) registers the same partitions without ``CLUSTERED BY``, and Spark shuffles or broadcasts.

Spark reads every file of a registered directory and nothing else: a missing or truncated file
reads as fewer rows, a stray one (a killed copy's temporary file) as extra rows. So before a
replica directory is registered it is listed and compared with the files the catalog recorded
(:func:`check_candidates`, one listing a directory: spark.listing); a directory that is not exact
is reported bad and the bucket's next replica is tried; a bucket with none left fails the read
with one line naming the table, partition, bucket and what is wrong with each replica.

A session is left as found but for what the caller asked for (``docs``: README "Your own Spark
code"): one temp view per table, named as the query names it (:func:`view_names`), and its backing
table in :data:`DATABASE`; :func:`unregister_tables` drops them. A temp view of that name that is
not ours is never replaced unless ``replace_views=True``. A Hive session catalog is refused: its
tables are the user's metastore (ARCHITECTURE.md, "Registration in a user's session").

On Spark Connect (no JVM on the client) the statements are the same, through ``spark.sql``; the
replica check lists the directories on the cluster (:func:`check_candidates_on_cluster`).
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

from airflow_colocate.core.contract import BadReplica, ReadReplica, ReadTable
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark import listed_views, locality, object_stores, replica_paths
from airflow_colocate.spark.connect import is_connect, list_on_cluster
from airflow_colocate.spark.listing import check_listed, judge_replicas
from airflow_colocate.spark.timing import DriverClock
from airflow_colocate.storage import replica_dir

BUCKET_COLUMN = "__bucket"
READ_BUCKETS_PROPERTY = "colocate.read.buckets"  # read coalesced to that many buckets (the jar's CoalescedBucketScan)
BACKING_PREFIX = "__cl_"
# The database of the backing tables: never the user's current one (their DDL and SHOW TABLES stay theirs).
DATABASE = "colocate_registered"
REPLACE_VIEWS = "replace_views"  # the option that lets a registration replace a view that is not ours

# Per session (weakly: a stopped session's entry goes with it): backing table -> the statements that
# created it, and view -> the statement that created it (what "ours" means on Spark Connect).
_registered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_locations: dict[bool, str] = {}  # is_connect -> the database's location
EMPTY = "_empty"  # the backing tables' LOCATION under it (exists, never read)


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def quote_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def backing_table_name(name: str) -> str:
    return f"{BACKING_PREFIX}{name}"


def backing_ident(name: str) -> str:
    """The backing table of view ``name``, database-qualified and quoted, as the statements write it."""
    return f"{quote_ident(DATABASE)}.{quote_ident(backing_table_name(name))}"


def view_names(names: Sequence[str]) -> dict[str, str]:
    """Catalog table name (``orders`` or ``db.orders``) -> the temp view a query reads it as.

    A table is its own name without the database (``tpch.orders`` -> ``orders``, what existing
    queries use) unless another requested table has that name too: then each qualified one is
    ``<db>_<table>`` (``a.orders`` -> ``a_orders``, ``b.orders`` -> ``b_orders``), so two databases'
    tables never collapse into one view. Two requests that still land on one view name are refused."""
    short = [n.rpartition(".")[2] for n in names]
    out: dict[str, str] = {}
    for name, plain in zip(names, short):
        db = name.rpartition(".")[0]
        out[name] = f"{db}_{plain}" if db and short.count(plain) > 1 else plain
    seen: dict[str, str] = {}
    for name, view in out.items():
        if view.lower() in seen:
            raise ColocateError(f"tables {seen[view.lower()]!r} and {name!r} would both be registered as view "
                                f"{view!r}: read one of them in another call (or name them 'db.table' both)")
        seen[view.lower()] = name
    return out


def _location(spark) -> str:
    """The LOCATION of :data:`DATABASE` and of every backing table (each partition has its own, so
    nothing is ever read from or written to it): a fresh directory under this process's temp
    directory, or on Spark Connect, whose server's disk the client cannot see, under the server's
    ``spark.local.dir`` (else /tmp)."""
    remote = is_connect(spark)
    if remote not in _locations:
        if remote:
            base = (spark.conf.get("spark.local.dir", None) or "/tmp").split(",")[0].rstrip("/")
            _locations[remote] = f"file://{base}/colocate-registered-{uuid.uuid4().hex[:12]}"
        else:
            _locations[remote] = "file://" + tempfile.mkdtemp(prefix="colocate-registered-")
            os.mkdir(_locations[remote][7:] + "/" + EMPTY)  # else Spark logs a stack trace per table
    return _locations[remote]


HIVE_REFUSED = (
    "this session's catalog is Hive (spark.sql.catalogImplementation=hive), so the tables colocate registers "
    "would be created in your metastore: register and join_in_session need a session with "
    "spark.sql.catalogImplementation=in-memory (airflow_colocate.spark.session.get_spark makes one)")


def check_session_catalog(spark) -> None:
    """Refuse a Hive session catalog: every table DDL there is a metastore write (see ARCHITECTURE.md)."""
    if (spark.conf.get("spark.sql.catalogImplementation", "in-memory") or "").strip().lower() == "hive":
        raise ColocateError(HIVE_REFUSED)


def _ensure_database(spark) -> None:
    if not listed_views.exists(spark, DATABASE):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(DATABASE)} LOCATION {quote_str(_location(spark))}")


def _check(table: ReadTable) -> None:
    names = [c[0] for c in table.columns]
    lower = {n.lower() for n in names}
    if len(table.partition_cols) > 1:
        raise ColocateError(f"table {table.name}: at most one partition column is supported, got {table.partition_cols}")
    for col in [*table.dist_cols, *table.partition_cols]:
        if col.lower() not in lower:
            raise ColocateError(f"table {table.name}: column {col!r} is not among its columns {names}")
    if BUCKET_COLUMN in lower:
        raise ColocateError(f"table {table.name}: the column name {BUCKET_COLUMN!r} is reserved")
    if not table.partition_cols and len(table.partitions) > 1:
        raise ColocateError(f"table {table.name}: an unpartitioned table has one partition, got {len(table.partitions)}")
    for part in table.partitions:
        if len(part.bucket_paths) != table.bucket_num:
            raise ColocateError(f"table {table.name} partition {part.value!r}: {len(part.bucket_paths)} bucket paths "
                                f"for {table.bucket_num} buckets")


# Hadoop settings of the backing table's scans: parquet-mr verifies each page's CRC (Spark writes
# them), so a flipped byte in a data page fails the read instead of changing a value.
GUARD_OPTIONS = {"parquet.page.verify-checksum.enabled": "true"}


def bucket_guard(table: ReadTable, part_col: str | None) -> str:
    """The view's filter that stops a query at the first row whose ``pmod(hash(dist cols), n)``
    is not the bucket its directory was registered as.

    Spark's bucketed scan trusts the file names, so a file holding another bucket's rows joins
    silently wrong; this is the row-level proof. It must stay deterministic, or Spark stops pushing
    filters through the view and scans every partition (so no ``input_file_name()``). The message
    names the table, partition and bucket, not the file: reading the ``_metadata`` column for it
    built a struct for every row, 10-20 % of a colocated query's time (bench_seeds_variants.py);
    the join job adds the replica directory it registered for that bucket
    (:func:`name_the_replica`). The fallback (``bucketed=False``) is guarded too: another bucket's
    file loses and duplicates rows there as well."""
    keys = ", ".join(quote_ident(c) for c in table.dist_cols)
    seq = f"pmod(hash({keys}), {table.bucket_num})"
    bucket = quote_ident(BUCKET_COLUMN)
    where = [quote_str(f"{GUARD_PREFIX}{table.table or table.name}")]
    if part_col is not None:
        where += [quote_str(" partition "), f"cast({quote_ident(part_col)} AS STRING)"]
    where += [quote_str(" bucket "), f"cast({bucket} AS STRING)"]
    message = ", ".join([*where, quote_str(" holds a row of bucket "), f"cast({seq} AS STRING)", quote_str(
        " (a corrupt replica): the query stops instead of returning wrong rows; run 'colocate verify' to mark it "
        "bad and 'colocate balance' to repair it")])
    return f"CASE WHEN {seq} = {bucket} THEN true ELSE raise_error(concat({message})) END"


GUARD_PREFIX = "colocate: table "
_GUARD_MESSAGE = re.compile(r"colocate: table (?P<table>\S+)(?: partition (?P<partition>.*?))? bucket (?P<bucket>\d+) "
                            r"holds a row of bucket \d+")


def name_the_replica(message: str, tables: list[ReadTable]) -> str | None:
    """The guard's message with the replica directory registered for the bucket it names inserted
    (``… bucket 3 (replica file:///…/b00003) holds a row of bucket 5 …``), from the job's own
    registration; None when ``message`` holds no guard message."""
    m = _GUARD_MESSAGE.search(message)
    if m is None:
        return None
    text = message[m.start():].splitlines()[0]
    text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", text).rstrip(". ")
    bucket = int(m["bucket"])
    for table in tables:
        if (table.table or table.name) != m["table"]:
            continue
        for part in table.partitions:
            if (m["partition"] is None or part.value == m["partition"]) and bucket < len(part.bucket_paths):
                if part.bucket_paths[bucket]:
                    at = m.end("bucket")
                    return f"{text[:at - m.start()]} (replica {part.bucket_paths[bucket]}){text[at - m.start():]}"
    return text


def create_statements(table: ReadTable, location: str) -> list[str]:
    """The SQL that registers one table (exposed for tests and for the explain text)."""
    _check(table)
    part_cols = [c for c in table.partition_cols]
    part_lower = {c.lower() for c in part_cols}
    data_cols = [c for c in table.columns if c[0].lower() not in part_lower]
    part_defs = [c for p in part_cols for c in table.columns if c[0].lower() == p.lower()]
    backing = backing_ident(table.name)
    col_defs = ", ".join(f"{quote_ident(n)} {t}" for n, t in [*data_cols, *part_defs, (BUCKET_COLUMN, "INT")])
    partitioned = ", ".join(quote_ident(n) for n, _ in [*part_defs, (BUCKET_COLUMN, "INT")])
    clustered = ""
    if table.bucketed:
        clustered = (
            f" CLUSTERED BY ({', '.join(quote_ident(c) for c in table.dist_cols)}) INTO {table.bucket_num} BUCKETS"
        )
    options = ""
    if table.bucket_guard:
        options = " OPTIONS (" + ", ".join(f"{quote_str(k)} = {quote_str(v)}" for k, v in GUARD_OPTIONS.items()) + ")"
    coalesced = table.bucketed and 0 < table.read_buckets < table.bucket_num
    properties = f" TBLPROPERTIES ({quote_str(READ_BUCKETS_PROPERTY)} = '{table.read_buckets}')" if coalesced else ""
    out = [f"DROP TABLE IF EXISTS {backing}", f"CREATE TABLE {backing} ({col_defs}) USING parquet PARTITIONED BY "
           f"({partitioned}){clustered} LOCATION {quote_str(location)}{options}{properties}"]
    specs = []
    for part in table.partitions:
        for bucket, path in enumerate(part.bucket_paths):
            if not path:
                continue  # the bucket has no rows in this partition
            spec = [f"{quote_ident(part_defs[0][0])} = {quote_str(part.value)}"] if part_defs else []
            spec.append(f"{quote_ident(BUCKET_COLUMN)} = {bucket}")
            specs.append(f"PARTITION ({', '.join(spec)}) LOCATION {quote_str(path)}")
    if specs:
        out.append(f"ALTER TABLE {backing} ADD " + " ".join(specs))
    select = ", ".join(quote_ident(n) for n, _ in table.columns)
    # A hint without a table name applies to the view's whole subtree: every join this view takes
    # part in may build its hash map from it (Spark's rules decide which side, per join type).
    hint = "/*+ SHUFFLE_HASH */ " if table.hash_build and table.bucketed else ""
    view = f"CREATE OR REPLACE TEMP VIEW {quote_ident(table.name)} AS SELECT {hint}{select} FROM {backing}"
    if table.bucket_guard:
        view += f" WHERE {bucket_guard(table, part_defs[0][0] if part_defs else None)}"
    out.append(view)
    return out


DEFAULT_CHECK_THREADS = 32


class UnreadableBuckets(ColocateError):
    """No replica of some bucket holds exactly its recorded files: the read stops rather than
    return fewer (or more) rows. ``bad`` lists every replica found wrong, for the catalog."""

    def __init__(self, message: str, bad: list[BadReplica]):
        super().__init__(message)
        self.bad = bad


@dataclass
class Registered:
    """What :func:`register_tables` registered: the tables with the replica each bucket reads
    (``bucket_paths``, candidates resolved) and the replicas found bad on the way."""

    tables: list[ReadTable]
    bad: list[BadReplica] = field(default_factory=list)
    checked: int = 0  # replica directories listed


def check_candidates(tables: list[ReadTable], *, threads: int = DEFAULT_CHECK_THREADS,
                     judge: Callable[[list[ReadReplica]], list[str | None]] | None = None) -> Registered:
    """Choose, per (table, partition, bucket) with rows, the first candidate replica whose directory
    holds exactly its recorded files; list directories (spark.listing: a partition's at a time,
    ``threads`` partitions at once), and a later candidate only where an earlier one was bad. Raises :class:`UnreadableBuckets` when a bucket has no exact
    replica left. Tables without candidates are returned as they are (registered unchecked).
    ``judge``: what is wrong with each of a round's replicas (None: exact), instead of listing them
    from this process (:func:`check_candidates_on_cluster` lists them on the cluster)."""
    # (table index, partition index, bucket) -> position in its candidate list
    at: dict[tuple[int, int, int], int] = {}
    for ti, table in enumerate(tables):
        for pi, part in enumerate(table.partitions):
            if not part.candidates:
                continue
            if len(part.candidates) != len(part.bucket_paths):
                raise ColocateError(f"table {table.name} partition {part.value!r}: {len(part.candidates)} candidate "
                                    f"lists for {len(part.bucket_paths)} buckets")
            for b, path in enumerate(part.bucket_paths):
                if path:  # a bucket without rows is not registered, so not read
                    at[(ti, pi, b)] = 0
    chosen: dict[tuple[int, int, int], str] = {}
    bad: list[BadReplica] = []
    why: dict[tuple[int, int, int], list[str]] = {}
    checked = 0
    pending = [k for k in at if tables[k[0]].partitions[k[1]].candidates[k[2]]]
    for k in at.keys() - set(pending):
        why[k] = ["the catalog lists no replica"]
    while pending:
        todo = [(k, tables[k[0]].partitions[k[1]].candidates[k[2]][at[k]]) for k in pending]
        results = (judge or (lambda rs: judge_replicas(rs, threads)))([r for _, r in todo])
        checked += len(todo)
        pending = []
        for (k, replica), problem in zip(todo, results):
            if problem is None:
                chosen[k] = replica.path
                continue
            table, part = tables[k[0]], tables[k[0]].partitions[k[1]]
            bad.append(BadReplica(replica_id=replica.replica_id, table=table.table or table.name, partition=part.value,
                                  bucket_seq=k[2], backend_id=replica.backend_id, path=replica.path, reason=problem))
            why.setdefault(k, []).append(f"backend {replica.backend_id} ({replica.path}): {problem}")
            at[k] += 1
            if at[k] < len(part.candidates[k[2]]):
                pending.append(k)
    lost = sorted(k for k in at if k not in chosen)
    if lost:
        ti, pi, b = lost[0]
        table = tables[ti]
        more = f" (and {len(lost) - 1} more bucket{'s' if len(lost) > 2 else ''})" if len(lost) > 1 else ""
        raise UnreadableBuckets(
            f"cannot read {table.table or table.name} partition {table.partitions[pi].value} bucket {b}: no replica holds "
            f"exactly the files the catalog recorded, so the read stops instead of returning wrong rows: "
            f"{'; '.join(why[lost[0]])}{more}. The bad replicas are marked bad; run 'colocate balance' to repair them "
            f"from a good copy, or rewrite the partition if none is left", bad)
    out = []
    for ti, table in enumerate(tables):
        parts = []
        for pi, part in enumerate(table.partitions):
            if not part.candidates:
                parts.append(part)
                continue
            paths = [chosen.get((ti, pi, b), "") if path else "" for b, path in enumerate(part.bucket_paths)]
            parts.append(replace(part, bucket_paths=paths, candidates=[]))
        out.append(replace(table, partitions=parts))
    return Registered(tables=out, bad=bad, checked=checked)


def check_candidates_on_cluster(spark, tables: list[ReadTable]) -> Registered:
    """:func:`check_candidates` with the directories listed on the cluster (:func:`list_on_cluster`,
    one Spark scan per round of candidates) and judged by the same rules
    (:func:`airflow_colocate.storage.replica_dir.replica_problem`)."""
    def judge(replicas: list[ReadReplica]) -> list[str | None]:
        listings = list_on_cluster(spark, [r.path for r in replicas])
        return [replica_dir.replica_problem(listings[r.path][0], files=r.files, size=r.bytes, dirs=listings[r.path][1])
                for r in replicas]

    return check_candidates(tables, judge=judge)


def register_tables(spark, tables: list[ReadTable], *, threads: int | None = None, replace_views: bool = False,
                    clock: DriverClock | None = None, report_dirs: Mapping[int, str] | None = None) -> Registered:
    """Register every table in the session's catalog: ``spark.sql('select … from <name>')`` works.

    Each bucket's replica is checked first: on a classic session by the driver
    (:func:`check_candidates`, ``threads`` listings at a time, default
    ``spark.colocate.register.threads`` or 32), on Spark Connect by the cluster
    (:func:`check_candidates_on_cluster`); the result says which replicas were registered and which
    were found bad. A temp view of a table's name that this module did not create stops the
    registration before anything is created, unless ``replace_views``. ``clock``: times the
    ``check`` and the ``views`` (spark.timing). ``report_dirs`` (backend id -> read-failure folder):
    queries not ours will read the tables, so each bucket is registered as its replica set where the
    session can read one (spark.replica_paths); the returned tables name the checked replica."""
    with clock.phase("views") if clock else nullcontext():
        check_session_catalog(spark)
        texts = {table.name: _check_view_free(spark, table.name, replace_views) for table in tables}
    with clock.phase("check") if clock else nullcontext():
        if is_connect(spark):
            registered = check_candidates_on_cluster(spark, tables)
        else:
            if threads is None:
                threads = int(spark.conf.get("spark.colocate.register.threads", str(DEFAULT_CHECK_THREADS)))
            registered = check_candidates(tables, threads=threads)
    with clock.phase("views") if clock else nullcontext():
        _ensure_database(spark)
        location = locality.read_location(spark, f"{_location(spark)}/{EMPTY}")
        roots = spark.conf.get(locality.ROOTS_KEY, "") or ""  # the hosts a listed view's files are on
        chosen, location = replica_paths.for_user_queries(spark, registered.tables, tables, registered.bad, report_dirs,
                                                          location, lambda path: locality.read_location(spark, path))
        for table, plan in zip(chosen, tables):  # under colocatefile:// when local reads are on (spark.locality)
            table = locality.located(spark, table)
            _run(spark, table, create_statements(table, object_stores.location_for(table, location)), texts[table.name], roots, plan)
    return registered


def _state(spark) -> tuple[dict[str, list[str]], dict[str, str]]:
    """This session's (backing table -> its statements, view -> its statement)."""
    return _registered.setdefault(spark, ({}, {}))


def _run(spark, table: ReadTable, statements: list[str], current=None, roots="", plan: ReadTable | None = None) -> None:
    """Run one table's statements, skipping the table's when this session holds exactly that table
    (same columns, buckets, replica directories) and the view's when it is the view they made over
    it (:func:`_same_view`). Safe: a committed replica directory never changes and each was just
    checked. ``current``: the view's (exists, text) as :func:`_check_view_free` read it; ``plan``:
    the table as planned (its candidates' recorded files: the listing's check, spark.listing)."""
    *table_statements, view = statements
    name, (tables, views) = table.name, _state(spark)
    backing = backing_table_name(name)
    if fresh := tables.get(backing) != table_statements or not listed_views.exists(spark, DATABASE, backing):
        tables.pop(backing, None)
        for statement in table_statements:
            spark.sql(statement)
        tables[backing] = table_statements
    if fresh or not _same_view(spark, name, view, current) or not listed_views.same_roots(spark, name, roots):
        _create_view(spark, table, view, roots, plan or table)
        views[name] = view


def _create_view(spark, table: ReadTable, statement: str, roots: str, plan: ReadTable) -> None:
    """The listed view (spark.listed_views) on a classic session, else (Connect, or no listed relation) the text."""
    part = [c for c, _ in table.columns if table.partition_cols and c.lower() == table.partition_cols[0].lower()]
    if not is_connect(spark) and listed_views.create(
            spark, table.name, statement, roots, backing=backing_ident(table.name), bucket_col=quote_ident(BUCKET_COLUMN),
            columns=[quote_ident(c) for c, _ in table.columns], hint="SHUFFLE_HASH" if table.hash_build and table.bucketed
            else None, where=bucket_guard(table, part[0] if part else None) if table.bucket_guard else None,
            check=lambda files: check_listed(table, files, plan)):
        return
    spark.sql(statement)


_VIEW = re.compile(r"CREATE OR REPLACE TEMP VIEW `((?:[^`]|``)+)` AS (.*)", re.S)


def _temp_view_text(spark, name: str) -> tuple[bool, str | None]:
    """Whether the session has a temp view ``name``, and its text (None where Spark Connect, which
    has no call for it, cannot tell)."""
    if is_connect(spark):
        found = [t for t in spark.catalog.listTables(pattern=name) if t.isTemporary and t.name.lower() == name.lower()]
        return bool(found), None
    raw = listed_views.raw_view(spark, name)  # a view listed_views made stands for the text it was made from
    made = _VIEW.fullmatch(listed_views.made_here(spark, name, raw) or "") if raw is not None else None
    return (False, None) if raw is None else (True, made[2] if made else listed_views.view_text(raw))


def _ours(spark, name: str, text: str | None) -> bool:
    """Whether the temp view ``name`` is one this module created: it reads our backing table (from its
    text; on Spark Connect, this session created it and its plan still reads that table)."""
    ident = backing_ident(name)
    if text is not None:  # Spark's names are case-insensitive: our view `a` is still ours when asked for as `A`
        return f"FROM {ident}".lower() in text.lower()
    if name.lower() not in {view.lower() for view in _state(spark)[1]}:
        return False
    try:
        plan = spark.table(quote_ident(name))._explain_string(extended=True)
    except Exception as exc:  # noqa: BLE001 - our backing table was dropped: still our view
        return backing_table_name(name).lower() in str(exc).lower()
    return f"{DATABASE}.{backing_table_name(name)}".lower() in plan.lower()


def _check_view_free(spark, name: str, replace_views: bool) -> tuple[bool, str | None]:
    """Refuse a temp view ``name`` that is not ours (unless ``replace_views``); its (exists, text)."""
    exists, text = _temp_view_text(spark, name)
    if exists and not replace_views and not _ours(spark, name, text):
        raise ColocateError(f"this session already has a temporary view {name!r} that colocate did not create: it is "
                            f"not replaced; drop it, read the table under another name, or pass {REPLACE_VIEWS}=True")
    return exists, text


def _same_view(spark, name: str, statement: str, current: tuple[bool, str | None] | None = None) -> bool:
    """Whether the session's temp view ``name`` already has the text ``statement`` would give it."""
    m = _VIEW.fullmatch(statement)
    if m is None:
        return False
    exists, text = current or _temp_view_text(spark, name)
    if not exists:
        return False
    if text is None:  # Spark Connect: our own statement, and the view still ours
        return _state(spark)[1].get(name) == statement and _ours(spark, name, None)
    return text == m[2]


def unregister_tables(spark, names: Iterable[str] | None = None) -> list[str]:
    """Drop the temp views ``names`` (default: every one this module created in this session) and
    their backing tables, and :data:`DATABASE` once it holds no table; a view that is no longer ours
    (the caller replaced it) is left alone. Returns the views dropped."""
    tables, views = _state(spark)
    dropped = []
    for name in sorted(views if names is None else names):
        exists, text = _temp_view_text(spark, name)
        if exists and _ours(spark, name, text):
            spark.catalog.dropTempView(name)
            dropped.append(name)
        views.pop(name, None)
        listed_views.forget(spark, name)
        backing = backing_table_name(name)
        tables.pop(backing, None)
        spark.sql(f"DROP TABLE IF EXISTS {backing_ident(name)}")  # external: the replicas stay
    # listTables(db) lists the session's temp views too
    if spark.catalog.databaseExists(DATABASE) and not [t for t in spark.catalog.listTables(DATABASE) if not t.isTemporary]:
        spark.sql(f"DROP DATABASE IF EXISTS {quote_ident(DATABASE)}")
    return dropped
