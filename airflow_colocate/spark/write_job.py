"""The write job: execute one :class:`~airflow_colocate.core.contract.WritePlan`.

Launch (through :mod:`airflow_colocate.spark.entry`, which writes the report or the one-line error)::

    spark-submit [--master …] /…/airflow_colocate/spark/entry.py --kind write --plan file:///path/plan.json

:func:`run_write` reads as the steps it takes (each logged as ``colocate-write: …`` by the entry):

1. read the source (a file source, or a query over registered tables) — :func:`read_source`;
2. check its schema against the table's (safe widening only, :func:`~airflow_colocate.core.sqltypes.widening_ok`)
   and the partition column's values — :func:`conform`;
3. bucket it with Spark's own hash partitioning, ``repartition(n, *dist_cols)`` — i.e.
   ``pmod(murmur3(cols, 42), n)``, the bucket id of Spark's bucketed writes — sort each bucket by
   those columns, and write the non-partition columns as snappy parquet to the staging directory,
   one file per non-empty bucket,
   where the writing task's index is the bucket seq (checked, not trusted) — :func:`stage`;
4. place the files with a Spark job over the buckets, running :mod:`airflow_colocate.storage.place`
   on the executors (renames, checksum-verified replica copies, an append's base files) — :func:`place`;
5. delete the staging directory and return the WriteReport.

A failure anywhere raises and no report is written. The job only ever writes into the plan's replica
directories (which it refuses to use if they hold files it did not produce) and its staging
directory; it never touches the catalog.
"""

from __future__ import annotations

import logging
import re
import time
from contextlib import contextmanager

from airflow_colocate.core.contract import ReplicaReport, WritePlan, WriteReport
from airflow_colocate.core.errors import ColocateError, SchemaMismatch
from airflow_colocate.core.sqltypes import comparable_type, widening_ok
from airflow_colocate.spark.failures import executor_error, is_spark_error, one_line
from airflow_colocate.spark.shipping import ship_context
from airflow_colocate.storage import fs
from airflow_colocate.storage import place as placement

FORMATS = ("parquet", "csv", "json", "orc")


log = logging.getLogger("airflow_colocate.spark.write")  # shown as colocate-write: … (spark.entry)


@contextmanager
def timed(timings: dict | None, phase: str):
    """Add the wall time of a phase to ``timings`` (when given): ``bench_write.py --profile`` shows
    where a small write's fixed cost goes."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - t0


# ---------------------------------------------------------------------- plan


def check_plan(plan: WritePlan) -> None:
    """Refuse a malformed plan before reading anything."""
    where = f"write plan {plan.job_id} for {plan.table}"
    if plan.mode not in ("overwrite", "append"):
        raise ColocateError(f"{where}: mode must be 'overwrite' or 'append', got {plan.mode!r}")
    if len(plan.partition_cols) > 1:
        raise ColocateError(f"{where}: at most one partition column is supported, got {plan.partition_cols}")
    names = {c[0].lower() for c in plan.columns}
    part = {c.lower() for c in plan.partition_cols}
    for col in [*plan.dist_cols, *plan.partition_cols]:
        if col.lower() not in names:
            raise ColocateError(f"{where}: column {col!r} is not among the table columns {[c[0] for c in plan.columns]}")
    if not plan.dist_cols or any(c.lower() in part for c in plan.dist_cols):
        raise ColocateError(f"{where}: needs distribution columns that are not partition columns, got {plan.dist_cols}")
    seqs = sorted(b.bucket_seq for b in plan.buckets)
    if plan.bucket_num < 1 or seqs != list(range(plan.bucket_num)):
        raise ColocateError(f"{where}: needs exactly one target per bucket 0..{plan.bucket_num - 1}, got seqs {seqs}")
    if plan.layout_buckets and (plan.layout_buckets < plan.bucket_num or plan.layout_buckets % plan.bucket_num):
        raise ColocateError(f"{where}: a layout of {plan.layout_buckets} buckets must be a multiple of its "
                            f"{plan.bucket_num} buckets")
    for b in plan.buckets:
        if not b.replicas:
            raise ColocateError(f"{where}: bucket {b.bucket_seq} has no replica target")
        if len({r.path for r in b.replicas}) != len(b.replicas):
            raise ColocateError(f"{where}: bucket {b.bucket_seq} names one replica directory twice")
    if plan.source.query is None and not plan.source.path:
        raise ColocateError(f"{where}: the source needs a path (with a format) or a query")


def _col_map(plan: WritePlan) -> dict[str, tuple[str, str]]:
    """lower-case name -> (table's spelling, normalized type)."""
    return {name.lower(): (name, comparable_type(type_)) for name, type_ in plan.columns}


def _ref(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _ddl(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"`{n.replace('`', '``')}` {t}" for n, t in columns)


# ---------------------------------------------------------------------- read


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[{")


def read_source(spark, plan: WritePlan):
    """The source as a DataFrame (not yet checked against the table)."""
    source = plan.source
    if source.query is not None:
        if source.tables:
            from airflow_colocate.spark.register import register_tables

            register_tables(spark, source.tables)
        log.info(f"source: query over {[t.name for t in source.tables]}")
        return spark.sql(source.query)

    fmt = (source.format or "parquet").lower()
    if fmt not in FORMATS:
        raise ColocateError(f"source format {source.format!r} is not supported: use one of {', '.join(FORMATS)}")
    path = source.path
    if not _has_glob(path):
        try:
            missing = not fs.exists(path)
        except ColocateError:
            missing = False  # a scheme only Spark can read: let Spark say
        if missing:
            raise ColocateError(f"source path {path} does not exist (table {plan.table}, partition {plan.partition_value})")

    options = {k: str(v) for k, v in source.options.items()}
    schema = options.pop("schema", None)
    if fmt in ("csv", "json"):
        options.setdefault("mode", "FAILFAST")
    if fmt == "csv":
        options.setdefault("header", "true")
    if fmt in ("csv", "json") and schema is None and options.get("inferSchema", "false").lower() != "true":
        schema = _text_schema(spark, plan, fmt, path, options)
    reader = spark.read.format(fmt).options(**options)
    if schema is not None:
        reader = reader.schema(schema)
    log.info(f"source: {fmt} {path}" + (f" schema <{schema}>" if schema else ""))
    return reader.load(path)


def _text_schema(spark, plan: WritePlan, fmt: str, path: str, options: dict[str, str]) -> str:
    """The table's schema for a csv/json source without one.

    JSON fields are matched by name: the table's columns minus the partition column. A CSV with a
    header is read positionally by Spark, so the schema follows the header's order (table types for
    known names, string for unknown ones, which the schema check then reports as extra columns).
    """
    cols = _col_map(plan)
    part = {c.lower() for c in plan.partition_cols}
    if fmt == "csv" and options.get("header", "true").lower() == "true":
        header = (
            spark.read.format("csv").options(**options).option("inferSchema", "false").load(path).columns
        )
        return _ddl([(h, cols[h.lower()][1] if h.lower() in cols else "string") for h in header])
    return _ddl([(name, type_) for name, type_ in plan.columns if name.lower() not in part])


# ---------------------------------------------------------------------- check


def conform(spark, df, plan: WritePlan, *, keep_partition: bool = False):
    """The source's non-partition columns under the table's names and types, in table order.

    Raises :class:`SchemaMismatch` naming every missing, extra or ill-typed column, and
    :class:`ColocateError` when a partition column in the source holds another value.
    ``keep_partition`` (a bulk import, whose source holds many partitions): the partition columns
    are neither checked against ``plan.partition_value`` nor dropped, but kept last, as strings.
    """
    from pyspark.sql import functions as F

    cols = _col_map(plan)
    part = {c.lower() for c in plan.partition_cols}
    source: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    for field in df.schema.fields:
        key = field.name.lower()
        if key in source:
            problems.append(f"source column {field.name!r} appears twice (names are case-insensitive)")
        source[key] = (field.name, comparable_type(field.dataType.simpleString()))
    for key, (name, table_type) in cols.items():
        if key not in source:
            if key not in part:
                problems.append(f"column {name!r} ({table_type}) is missing from the source")
            continue
        src_name, src_type = source[key]
        if key in part:
            continue  # not written: only its values are checked (below), through try_cast
        if not widening_ok(src_type, table_type):
            problems.append(
                f"column {name!r}: source type {src_type} cannot be written to table type {table_type} "
                f"(only equal types or a lossless widening are allowed)"
            )
    extra = [(src_name, src_type) for key, (src_name, src_type) in source.items() if key not in cols]
    if extra and not plan.add_columns:
        alter = " ".join(f"--add-column '{n} {t}'" for n, t in extra)
        problems.append(f"source column{'s' if len(extra) > 1 else ''} {', '.join(f'{n!r} ({t})' for n, t in extra)} "
                        f"{'are' if len(extra) > 1 else 'is'} not {'columns' if len(extra) > 1 else 'a column'} of table "
                        f"{plan.table}: 'colocate table alter {plan.table} {alter}' accepts "
                        f"{'them' if len(extra) > 1 else 'it'} (or write with schema_evolution='add_columns')")
    if problems:
        raise SchemaMismatch(
            f"source does not match table {plan.table} (partition {plan.partition_value}): " + "; ".join(problems)
        )

    guards = []
    for pcol in ([] if keep_partition else plan.partition_cols):
        name, table_type = cols[pcol.lower()]
        check_partition_value(spark, plan, name, table_type)
        if pcol.lower() in source:
            # Checked while the rows are written, not by a pass of its own (a small write's fixed
            # cost): the first row with another value fails the write job, before anything is placed.
            guards.append(F.when(_differs(plan, source[pcol.lower()][0], table_type),
                                 F.raise_error(F.lit(f"{_PARTITION_GUARD} {name}"))))

    out = []
    for key, (name, table_type) in cols.items():
        if key in part:
            continue
        src_name, src_type = source[key]
        column = _ref(src_name)
        if src_type != table_type:
            column = column.cast(table_type)
        if guards and not out:
            column = F.coalesce(*guards, column)  # raise_error is NULL-typed: the column keeps its type
        out.append(column.alias(name))
    if plan.add_columns:  # new columns after the table's, as the catalog will append them
        out += [_ref(name) for name, _ in extra]
    if keep_partition:
        out += [_ref(source[p.lower()][0]).cast("string").alias(cols[p.lower()][0]) for p in plan.partition_cols]
    return df.select(*out)


def new_columns(df, plan: WritePlan) -> list[list[str]]:
    """[[name, type], ...] of the source's columns the table does not have (schema_evolution)."""
    cols = _col_map(plan)
    return [[f.name, comparable_type(f.dataType.simpleString())] for f in df.schema.fields if f.name.lower() not in cols]


_PARTITION_GUARD = "colocate: a row of the source has another partition value in column"
# Types whose literals the catalog's own check (core.naming.check_partition_literal) reads exactly
# as Spark's cast does; any other type is checked by Spark itself.
_PYTHON_CHECKED = ("date", "tinyint", "smallint", "int", "bigint", "boolean", "string")


def check_partition_value(spark, plan: WritePlan, name: str, table_type: str) -> None:
    """Refuse a partition value that is not a literal of the partition column's type (a ``date``
    partition ``2026-13-45`` would be written, then read back as NULL)."""
    from airflow_colocate.core.errors import InvalidArgument
    from airflow_colocate.core.naming import check_partition_literal

    if table_type in _PYTHON_CHECKED or table_type.startswith(("varchar", "char")):
        try:
            check_partition_literal(plan.partition_value, name, table_type)  # no Spark job for the common types
            return
        except InvalidArgument:
            typed = None
    else:
        typed = spark.sql(f"SELECT try_cast(:v AS {table_type}) AS v", args={"v": plan.partition_value}).collect()[0][0]
    if typed is None:
        raise ColocateError(
            f"partition value {plan.partition_value!r} of table {plan.table} is not a valid {table_type} "
            f"for partition column {name!r}"
        )


def _differs(plan: WritePlan, src_name: str, table_type: str):
    from pyspark.sql import functions as F

    return ~_ref(src_name).try_cast(table_type).eqNullSafe(F.lit(plan.partition_value).cast(table_type))


def partition_column_problem(df, plan: WritePlan) -> str | None:
    """The one-line error for a source whose partition column holds other values (how many rows,
    one example), or None. Run only after the write's guard fired: it is a pass over the source."""
    from pyspark.sql import functions as F

    cols = _col_map(plan)
    fields = {f.name.lower(): f.name for f in df.schema.fields}
    for pcol in plan.partition_cols:
        name, table_type = cols[pcol.lower()]
        if pcol.lower() not in fields:
            continue
        src_name = fields[pcol.lower()]
        differs = _differs(plan, src_name, table_type)
        row = df.select(
            F.count(F.when(differs, 1)).alias("n"),
            F.first(F.when(differs, F.coalesce(_ref(src_name).cast("string"), F.lit("NULL"))), ignorenulls=True).alias("example"),
        ).collect()[0]
        if row["n"]:
            return (f"partition column {name!r} of the source must be {plan.partition_value!r} in every row of "
                    f"this write to table {plan.table}, but {row['n']} rows differ (e.g. {row['example']!r})")
    return None


# ---------------------------------------------------------------------- place


_AUTO_BUCKETED_SCAN = "spark.sql.sources.bucketing.autoBucketedScan.enabled"
_HASH_PARTITIONING = re.compile(r"hashpartitioning\(([^()]*), (\d+)\)")


def check_bucket_partitioning(df, dist: list[str], bucket_num: int) -> None:
    """Raise unless Spark will run ``df`` as ``hashpartitioning(dist, bucket_num)``: task b = bucket b."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.initialPlan()  # after EnsureRequirements and the bucketed-scan rules
    text = plan.outputPartitioning().toString()
    if bucket_num == 1 and text.startswith("SinglePartition"):
        return  # Spark plans repartition(1, …) as one partition: every row is bucket 0 anyway
    want = [c.lower() for c in dist]
    for exprs, n in _HASH_PARTITIONING.findall(text):
        names = [re.sub(r"#\d+L?$", "", e.strip()).strip("`").lower() for e in exprs.split(",")]
        if names == want and int(n) == bucket_num:
            return
    raise ColocateError(
        f"Spark would not write one bucket per task (output partitioning {text}, expected "
        f"hashpartitioning({', '.join(dist)}, {bucket_num})); refusing to write buckets that may be mixed"
    )


def write_buckets(spark, out, dist: list[str], bucket_num: int, uri: str, *, sort_first: tuple[str, ...] = (),
                  conf: dict[str, str] | None = None, job_group: tuple[str, str] | None = None,
                  description: str | None = None, failing: str) -> dict[int, list[str]]:
    """Bucket ``out`` with Spark's hash partitioning and write it to ``uri``: one snappy parquet file
    per non-empty bucket, its rows sorted by ``sort_first`` and then the bucket key; returns bucket
    seq -> files. The write stages one partition through it, the import all of them at once
    (``sort_first`` = the partition column). ``conf`` and the job group or description hold for the
    Spark job only (:func:`~airflow_colocate.spark.session.scoped`); ``failing`` starts the one line
    of a Spark failure."""
    from airflow_colocate.spark.session import scoped

    # Spark drops ``repartition(n, key)`` when its input is a bucketed scan with the same hash
    # partitioning, and may then turn that scan into a plain one because "nothing needs it" (it
    # writes files of mixed buckets). Keep bucketed scans bucketed, and check the plan.
    with scoped(spark, {_AUTO_BUCKETED_SCAN: "false", **(conf or {})}, job_group=job_group, description=description), \
            one_line(failing):
        # Sorted by the bucket key inside each file, as Doris keeps a tablet sorted by its key: a
        # sort-merge join then sorts runs already in order (Spark's TimSort: ~linear), or, with
        # the ordered read, does not sort at all. Paid once here instead of in every join.
        bucketed = out.repartition(bucket_num, *dist).sortWithinPartitions(*sort_first, *dist)
        check_bucket_partitioning(bucketed, dist, bucket_num)
        (
            bucketed.write.mode("overwrite")
            .option("compression", "snappy")
            .option("maxRecordsPerFile", 0)
            .parquet(uri)
        )
    return placement.staged_buckets(uri, bucket_num)


def stage(spark, plan: WritePlan, out) -> dict[int, list[str]]:
    """Bucket ``out`` with Spark's hash partitioning and write it to the staging directory, one file
    per non-empty bucket; returns bucket seq -> staged files."""
    cols = _col_map(plan)
    dist = [cols[c.lower()][0] for c in plan.dist_cols]
    count = plan.layout_buckets or plan.bucket_num  # a split group's finer layout: j goes to bucket j mod N
    log.info(f"bucketing by pmod(hash({', '.join(dist)}), {count}) into {plan.staging_uri}")
    staged = write_buckets(
        spark, out, dist, count, plan.staging_uri,
        description=f"colocate-write bucket {plan.table} {plan.partition_value}",
        failing=f"writing {plan.table} partition {plan.partition_value} failed while reading or bucketing the source")
    many = {b: len(f) for b, f in staged.items() if len(f) > 1}
    if many:
        log.info(f"note: several files for one bucket (bucket: files) {many}; all are placed in that bucket")
    log.info(f"staged {sum(len(v) for v in staged.values())} files for {len(staged)} non-empty buckets")
    return staged


def place(spark, plan: WritePlan, staged: dict[int, list[str]]) -> tuple[list[ReplicaReport], int]:
    """Place every bucket with :func:`~airflow_colocate.storage.place.place_bucket`, as one Spark job
    over the buckets; returns the replica reports in plan order and the rows the source added."""
    from airflow_colocate.spark.session import scoped

    tasks = placement.bucket_tasks(plan, staged)
    failed = f"placing the buckets of {plan.table} failed"
    try:
        with scoped(spark, description=f"colocate-write place {plan.table} {plan.partition_value}"):
            placed = [r for rs in on_executors(spark.sparkContext, placement.place_bucket, tasks) for r in rs]
    except ColocateError as exc:
        raise ColocateError(f"{failed}: {exc}") from exc
    except OSError as exc:
        raise ColocateError(f"{failed}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        if is_spark_error(exc):
            raise ColocateError(f"{failed}: {executor_error(exc)}") from exc
        raise
    replicas, source_rows = placement.placed_replicas(plan, placed)
    log.info(f"placed {len(replicas)} replicas of {plan.bucket_num} buckets, {source_rows} rows")
    return replicas, source_rows


def on_executors(sc, fn, tasks: list) -> list:
    """``fn`` of every task, in order: one Spark job over the tasks, or on a local master threads of
    the driver (the executors are this machine: the same code, the same checks, without the Python
    workers that cost more than placing a small write's buckets; copies and hashing release the
    GIL). The write's and the import's placing and splitting run through it."""
    if not tasks:
        return []
    slices = max(1, min(len(tasks), sc.defaultParallelism))
    if sc.master.startswith("local"):
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(slices) as pool:
            return list(pool.map(fn, tasks))
    ship_context(sc)
    return sc.parallelize(tasks, slices).map(fn).collect()


# ---------------------------------------------------------------------- run


def run_write(spark, plan: WritePlan, timings: dict | None = None) -> WriteReport:
    """Execute ``plan`` and return its report (:func:`airflow_colocate.spark.entry.run_plan` writes it).
    ``timings``, when given, receives the seconds of each phase."""
    started = time.time()
    check_plan(plan)
    log.info(f"job {plan.job_id}: {plan.mode} {plan.table} partition {plan.partition_value} v{plan.version} "
        f"into {plan.bucket_num} buckets")
    with timed(timings, "read+conform"), one_line(f"reading the source of {plan.table} failed"):
        source = read_source(spark, plan)
        out = conform(spark, source, plan)
        added = new_columns(source, plan) if plan.add_columns else []
    with timed(timings, "stage (bucket+write)"):
        try:
            staged = stage(spark, plan, out)
        except ColocateError as exc:
            if _PARTITION_GUARD not in str(exc):
                raise
            raise ColocateError(partition_column_problem(source, plan) or str(exc)) from exc
    with timed(timings, "place (move+copy+verify)"):
        replicas, source_rows = place(spark, plan, staged)
    with timed(timings, "delete staging"):
        fs.delete_tree(plan.staging_uri)
    return WriteReport(
        job_id=plan.job_id,
        table=plan.table,
        partition_value=plan.partition_value,
        version=plan.version,
        source_rows=source_rows,
        replicas=replicas,
        seconds=round(time.time() - started, 3),
        spark_version=spark.version,
        added_columns=added,
    )

