"""The write job: execute one :class:`~airflow_colocate.planner.contract.WritePlan` and write its report.

Launch::

    python -m airflow_colocate.spark.write_job --plan /path/plan.json
    spark-submit [--master …] /…/airflow_colocate/spark/write_job.py --plan file:///path/plan.json

Steps (each logged as ``colocate-write: …`` on stdout):

1. read the source (a file source, or a query over registered tables);
2. check its schema against the table's (safe widening only) and the partition column's values;
3. bucket it with Spark's own hash partitioning, ``repartition(n, *dist_cols)`` — i.e.
   ``pmod(murmur3(cols, 42), n)``, the bucket id of Spark's bucketed writes — and write the
   non-partition columns as snappy parquet to the staging directory, one file per non-empty bucket,
   where the writing task's index is the bucket seq (checked, not trusted);
4. place the files with a Spark job over the buckets (Python on the executors, so it runs on any
   cluster whose executors see the backend roots): the primary replica gets the staged file under
   Spark's bucket file name, every other replica is a checksum-verified copy of the primary, and an
   append carries the base version's files over (hard link or copy);
5. delete the staging directory and write the WriteReport atomically.

A failure anywhere raises and writes no report. The job only ever writes into the plan's replica
directories (which it refuses to use if they hold files it did not produce) and its staging
directory; it never touches the catalog.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from airflow_colocate.core.errors import ColocateError, SchemaMismatch
from airflow_colocate.planner.contract import ReplicaReport, WritePlan, WriteReport
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import fs, layout

FORMATS = ("parquet", "csv", "json", "orc")
_STAGED = re.compile(r"^part-(\d+)-.*\.parquet$")


def log(message: str) -> None:
    print(f"colocate-write: {message}", flush=True)


# ---------------------------------------------------------------------- types

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def _norm(type_name: str) -> str:
    from airflow_colocate.core.sqltypes import normalize_type

    try:
        return normalize_type(type_name)
    except ColocateError:
        return " ".join(type_name.strip().lower().split())


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.fullmatch(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def widening_ok(source_type: str, table_type: str) -> bool:
    """Whether a ``source_type`` column may be written into a ``table_type`` column.

    Equal types, or a widening that loses nothing: tinyint < smallint < int < bigint, float <
    double, an integral type into a decimal with enough integer digits, decimal(p,s) into
    decimal(p2,s2) with s2 >= s and p2-s2 >= p-s, date into timestamp. Never anything into string.
    """
    src, dst = _norm(source_type), _norm(table_type)
    if src == dst or src == "void":
        return True
    if src in _INTEGRAL and dst in _INTEGRAL:
        return _INTEGRAL.index(src) <= _INTEGRAL.index(dst)
    if src == "float" and dst == "double":
        return True
    dst_dec = _decimal(dst)
    if src in _INTEGRAL and dst_dec:
        precision, scale = dst_dec
        return precision - scale >= _INTEGRAL_DIGITS[src]
    src_dec = _decimal(src)
    if src_dec and dst_dec:
        (p, s), (p2, s2) = src_dec, dst_dec
        return s2 >= s and p2 - s2 >= p - s
    if src == "date" and dst in ("timestamp", "timestamp_ntz"):
        return True
    return False


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
    for b in plan.buckets:
        if not b.replicas:
            raise ColocateError(f"{where}: bucket {b.bucket_seq} has no replica target")
        if len({r.path for r in b.replicas}) != len(b.replicas):
            raise ColocateError(f"{where}: bucket {b.bucket_seq} names one replica directory twice")
    if plan.source.query is None and not plan.source.path:
        raise ColocateError(f"{where}: the source needs a path (with a format) or a query")


def _col_map(plan: WritePlan) -> dict[str, tuple[str, str]]:
    """lower-case name -> (table's spelling, normalized type)."""
    return {name.lower(): (name, _norm(type_)) for name, type_ in plan.columns}


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
        log(f"source: query over {[t.name for t in source.tables]}")
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
    log(f"source: {fmt} {path}" + (f" schema <{schema}>" if schema else ""))
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


def conform(spark, df, plan: WritePlan):
    """The source's non-partition columns under the table's names and types, in table order.

    Raises :class:`SchemaMismatch` naming every missing, extra or ill-typed column, and
    :class:`ColocateError` when a partition column in the source holds another value.
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
        source[key] = (field.name, _norm(field.dataType.simpleString()))
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
    for key, (src_name, src_type) in source.items():
        if key not in cols:
            problems.append(f"source column {src_name!r} ({src_type}) is not a column of table {plan.table}")
    if problems:
        raise SchemaMismatch(
            f"source does not match table {plan.table} (partition {plan.partition_value}): " + "; ".join(problems)
        )

    for pcol in plan.partition_cols:
        name, table_type = cols[pcol.lower()]
        typed = spark.sql(f"SELECT try_cast(:v AS {table_type}) AS v", args={"v": plan.partition_value}).collect()[0][0]
        if typed is None:
            raise ColocateError(
                f"partition value {plan.partition_value!r} of table {plan.table} is not a valid {table_type} "
                f"for partition column {name!r}"
            )
        if pcol.lower() in source:
            src_name = source[pcol.lower()][0]
            value = F.lit(plan.partition_value).cast(table_type)
            differs = ~_ref(src_name).try_cast(table_type).eqNullSafe(value)
            row = df.select(
                F.count(F.when(differs, 1)).alias("n"),
                F.first(F.when(differs, F.coalesce(_ref(src_name).cast("string"), F.lit("NULL"))), ignorenulls=True).alias("example"),
            ).collect()[0]
            if row["n"]:
                raise ColocateError(
                    f"partition column {name!r} of the source must be {plan.partition_value!r} in every row of "
                    f"this write to table {plan.table}, but {row['n']} rows differ (e.g. {row['example']!r})"
                )

    out = []
    for key, (name, table_type) in cols.items():
        if key in part:
            continue
        src_name, src_type = source[key]
        column = _ref(src_name)
        if src_type != table_type:
            column = column.cast(table_type)
        out.append(column.alias(name))
    return df.select(*out)


# ---------------------------------------------------------------------- place


_AUTO_BUCKETED_SCAN = "spark.sql.sources.bucketing.autoBucketedScan.enabled"
_HASH_PARTITIONING = re.compile(r"hashpartitioning\(([^()]*), (\d+)\)")


def check_bucket_partitioning(df, dist: list[str], bucket_num: int) -> None:
    """Raise unless Spark will run ``df`` as ``hashpartitioning(dist, bucket_num)``: task b = bucket b."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.initialPlan()  # after EnsureRequirements and the bucketed-scan rules
    text = plan.outputPartitioning().toString()
    want = [c.lower() for c in dist]
    for exprs, n in _HASH_PARTITIONING.findall(text):
        names = [re.sub(r"#\d+L?$", "", e.strip()).strip("`").lower() for e in exprs.split(",")]
        if names == want and int(n) == bucket_num:
            return
    raise ColocateError(
        f"Spark would not write one bucket per task (output partitioning {text}, expected "
        f"hashpartitioning({', '.join(dist)}, {bucket_num})); refusing to write buckets that may be mixed"
    )


def write_id_for(plan: WritePlan) -> str:
    """The id inside bucket file names; safe for Spark's ``_<bucket>.`` file-name parser."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", plan.job_id)


def staged_buckets(staging_uri: str, bucket_num: int) -> dict[int, list[str]]:
    """bucket seq -> staged file URIs, from the writing task's index in Spark's part file names.

    ``repartition(n, cols)`` makes task b hold exactly the rows of bucket b, and with
    ``maxRecordsPerFile=0`` each task writes one file; several files of one task all belong to it.
    """
    by_task: dict[int, list[str]] = {}
    for name, _ in fs.list_files(staging_uri):
        if name.startswith((".", "_")):
            continue  # _SUCCESS, .crc
        m = _STAGED.match(name)
        if not m:
            raise ColocateError(f"unexpected file {name!r} in staging directory {staging_uri}")
        by_task.setdefault(int(m.group(1)), []).append(fs.join(staging_uri, name))
    bad = [t for t in by_task if t >= bucket_num]
    if bad:
        raise ColocateError(
            f"Spark wrote files for tasks {sorted(bad)} but there are only {bucket_num} buckets: the task index "
            f"is not the bucket seq here; refusing to place them"
        )
    many = {t: len(f) for t, f in by_task.items() if len(f) > 1}
    if many:
        log(f"note: several files for one bucket (bucket: files) {many}; all are placed in that bucket")
    return {t: sorted(f) for t, f in by_task.items()}


def _rows(uri: str) -> int:
    import pyarrow.parquet as pq

    with fs.open_read(uri) as f:
        return pq.read_metadata(f).num_rows


def _own_name(name: str, write_id: str) -> bool:
    return name.startswith(f"part-00000-{write_id}_") or copy_mod.is_tmp_name(name)


def place_bucket(task: dict) -> list[dict]:
    """Executor side: place one bucket on all its replicas; returns one report dict per replica.

    ``task``: bucket, write_id, staged (URIs), replicas ([backend_id, dir]), base_paths (dirs).
    """
    bucket, write_id = task["bucket"], task["write_id"]
    replicas, base_paths = task["replicas"], [p for p in task["base_paths"]]

    # Refuse a replica directory holding files this write did not produce (a planner bug must not
    # make us write into a live version); our own files from a retried attempt are replaced.
    for i, (_, path) in enumerate(replicas):
        present = [n for n, _ in fs.list_files(path, missing_ok=True) if not n.startswith(".")]
        foreign = [n for n in present if not _own_name(n, write_id)]
        if foreign and i < len(base_paths) and base_paths[i]:
            base_names = {n for n, _ in copy_mod.replica_files(base_paths[i])}
            foreign = [n for n in foreign if n not in base_names]
        if foreign:
            raise ColocateError(
                f"replica directory {path} of bucket {bucket} already holds {foreign[:3]}, which this write "
                f"({write_id}) did not produce; a write must go to a new version directory"
            )
        fs.makedirs(path)

    primary = replicas[0][1]
    new_files: list[tuple[str, str]] = []  # (name, sha256) in the primary
    new_rows = new_bytes = 0
    index = 0
    for staged in task["staged"]:
        suffix = ".c000.snappy.parquet" if index == 0 else f".c{index:03d}.snappy.parquet"
        name = layout.bucket_file_name(write_id, bucket, suffix)
        dst = fs.join(primary, name)
        if not fs.exists(staged):
            # A retried task: an earlier attempt already moved this (non-empty) file.
            if not fs.exists(dst):
                raise ColocateError(f"staged file {staged} of bucket {bucket} is gone and {dst} does not exist")
            rows = _rows(dst)
            size, digest = fs.size(dst), copy_mod.sha256_file(dst)
        else:
            rows = _rows(staged)
            if rows == 0:
                continue  # Spark writes one empty file for an empty input: not a bucket file
            if fs.can_rename(staged, dst):
                fs.rename(staged, dst)
                size, digest = fs.size(dst), copy_mod.sha256_file(dst)
            else:
                size, digest = copy_mod.copy_file(staged, dst)
        new_files.append((name, digest))
        new_rows += rows
        new_bytes += size
        index += 1

    # append: the base version's files, from the same backend's base replica when there is one
    base_files: list[tuple[str, str]] = []
    base_rows = base_bytes = 0
    if base_paths and base_paths[0]:
        base_files, base_bytes = copy_mod.copy_replica(base_paths[0], primary, link=True)
        base_rows = sum(_rows(fs.join(primary, n)) for n, _ in base_files)
    clash = {n for n, _ in new_files} & {n for n, _ in base_files}
    if clash:
        raise ColocateError(f"bucket {bucket}: new files {sorted(clash)} have the names of base files")

    all_files = sorted(new_files + base_files)
    expected = dict(all_files)
    checksum = copy_mod.replica_checksum(all_files)
    reports = [(replicas[0], all_files)]
    for i, (backend_id, path) in enumerate(replicas[1:], start=1):
        got: list[tuple[str, str]] = []
        for name, digest in new_files:
            copy_mod.copy_file(fs.join(primary, name), fs.join(path, name), expect_sha256=digest)
            got.append((name, digest))
        if base_files:
            if i < len(base_paths) and base_paths[i]:
                carried, _ = copy_mod.copy_replica(
                    base_paths[i], path, link=True, expect={n: d for n, d in base_files}
                )
            else:  # no base replica on this backend: copy the primary's carried files
                for name, digest in base_files:
                    copy_mod.copy_file(fs.join(primary, name), fs.join(path, name), expect_sha256=digest)
                carried = base_files
            got.extend(carried)
        if dict(got) != expected:
            raise ColocateError(f"replica {path} of bucket {bucket} does not match the primary {primary}")
        reports.append(((backend_id, path), sorted(got)))

    # Leftovers of an earlier attempt of this same write (an extra file, a temporary copy) must not
    # be read as part of the bucket.
    for _, path in replicas:
        for name, _ in fs.list_files(path):
            if name not in expected and _own_name(name, write_id):
                fs.delete_file(fs.join(path, name))

    return [
        {
            "bucket_seq": bucket,
            "backend_id": backend_id,
            "path": path,
            "files": [n for n, _ in files],
            "rows": new_rows + base_rows,
            "bytes": new_bytes + base_bytes,
            "checksum": checksum,
            "new_rows": new_rows,
        }
        for (backend_id, path), files in reports
    ]


def place(spark, plan: WritePlan, staged: dict[int, list[str]]) -> list[dict]:
    """Run :func:`place_bucket` for every bucket as one Spark job."""
    write_id = write_id_for(plan)
    base_needed = plan.mode == "append"
    tasks = [
        {
            "bucket": b.bucket_seq,
            "write_id": write_id,
            "staged": staged.get(b.bucket_seq, []),
            "replicas": [[r.backend_id, r.path] for r in b.replicas],
            "base_paths": list(b.base_paths) if base_needed else [],
        }
        for b in sorted(plan.buckets, key=lambda b: b.bucket_seq)
    ]
    sc = spark.sparkContext
    sc.setJobDescription(f"colocate-write place {plan.table} {plan.partition_value}")
    slices = max(1, min(len(tasks), sc.defaultParallelism))
    return sc.parallelize(tasks, slices).flatMap(place_bucket).collect()


# ---------------------------------------------------------------------- run


def _spark_error(exc: BaseException) -> bool:
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, PySparkException) or type(exc).__module__.startswith("py4j")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip() and not line.startswith("\tat "):
            return line.strip()[:2000]
    return type(exc).__name__


def _executor_error(exc: BaseException) -> str:
    """The message of the error an executor raised (the last ``…Error: message`` line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        m = re.match(r"^[\w.]*(?:Error|Exception|Mismatch|NotFound|Conflict)\w*: (.+)$", line)
        if m and not line.startswith(("org.apache", "py4j", "java.")):
            return m.group(1)
    return _first_line(exc)


def run_write(spark, plan: WritePlan) -> WriteReport:
    """Execute ``plan`` and return its report (also written to ``plan.report_uri``)."""
    started = time.time()
    check_plan(plan)
    log(f"job {plan.job_id}: {plan.mode} {plan.table} partition {plan.partition_value} v{plan.version} "
        f"into {plan.bucket_num} buckets")
    try:
        df = read_source(spark, plan)
        out = conform(spark, df, plan)
    except ColocateError:
        raise
    except Exception as exc:
        if _spark_error(exc):
            raise ColocateError(f"reading the source of {plan.table} failed: {_first_line(exc)}") from exc
        raise

    cols = _col_map(plan)
    dist = [cols[c.lower()][0] for c in plan.dist_cols]
    log(f"bucketing by pmod(hash({', '.join(dist)}), {plan.bucket_num}) into {plan.staging_uri}")
    spark.sparkContext.setJobDescription(f"colocate-write bucket {plan.table} {plan.partition_value}")
    # Spark drops ``repartition(n, key)`` when its input is a bucketed scan with the same hash
    # partitioning, and may then turn that scan into a plain one because "nothing needs it" (it
    # writes files of mixed buckets). Keep bucketed scans bucketed, and check the plan.
    saved = spark.conf.get(_AUTO_BUCKETED_SCAN, None)
    spark.conf.set(_AUTO_BUCKETED_SCAN, "false")
    try:
        bucketed = out.repartition(plan.bucket_num, *dist)
        check_bucket_partitioning(bucketed, dist, plan.bucket_num)
        (
            bucketed.write.mode("overwrite")
            .option("compression", "snappy")
            .option("maxRecordsPerFile", 0)
            .parquet(plan.staging_uri)
        )
    except ColocateError:
        raise
    except Exception as exc:
        if _spark_error(exc):
            raise ColocateError(
                f"writing {plan.table} partition {plan.partition_value} failed while reading or bucketing the "
                f"source: {_first_line(exc)}"
            ) from exc
        raise
    finally:
        if saved is None:
            spark.conf.unset(_AUTO_BUCKETED_SCAN)
        else:
            spark.conf.set(_AUTO_BUCKETED_SCAN, saved)
    staged = staged_buckets(plan.staging_uri, plan.bucket_num)
    log(f"staged {sum(len(v) for v in staged.values())} files for {len(staged)} non-empty buckets")

    try:
        placed = place(spark, plan, staged)
    except Exception as exc:
        if _spark_error(exc):
            raise ColocateError(f"placing the buckets of {plan.table} failed: {_executor_error(exc)}") from exc
        raise
    expected = {(b.bucket_seq, r.backend_id) for b in plan.buckets for r in b.replicas}
    got = {(r["bucket_seq"], r["backend_id"]) for r in placed}
    if got != expected:
        raise ColocateError(f"placement reported {sorted(got ^ expected)} unlike the plan")
    order = {(b.bucket_seq, r.backend_id): i for b in plan.buckets for i, r in enumerate(b.replicas)}
    placed.sort(key=lambda r: (r["bucket_seq"], order[r["bucket_seq"], r["backend_id"]]))
    source_rows = sum(r["new_rows"] for r in placed if order[r["bucket_seq"], r["backend_id"]] == 0)
    replicas = [ReplicaReport(**{k: v for k, v in r.items() if k != "new_rows"}) for r in placed]
    log(f"placed {len(replicas)} replicas of {plan.bucket_num} buckets, {source_rows} rows")

    fs.delete_tree(plan.staging_uri)
    report = WriteReport(
        job_id=plan.job_id,
        table=plan.table,
        partition_value=plan.partition_value,
        version=plan.version,
        source_rows=source_rows,
        replicas=replicas,
        seconds=round(time.time() - started, 3),
        spark_version=spark.version,
    )
    fs.write_text_atomic(plan.report_uri, report.to_json())
    log(f"report written to {plan.report_uri} ({report.seconds}s)")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow_colocate.spark.write_job", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="path or URI of the WritePlan JSON")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, $SPARK_MASTER, local[*])")
    args = parser.parse_args(argv)
    plan = WritePlan.from_json(fs.read_text(args.plan))
    if plan.kind != "write":
        log(f"FAILED: {args.plan} is a {plan.kind!r} plan, not a write plan")
        return 2
    from pyspark.sql import SparkSession

    from airflow_colocate.spark.session import get_spark

    owned = SparkSession.getActiveSession() is None  # stop only a session this call started
    spark = get_spark(f"colocate-write {plan.table} {plan.partition_value}", master=args.master)
    try:
        run_write(spark, plan)
    except ColocateError as exc:
        log(f"FAILED: {exc}")
        fs.write_text_atomic(plan.report_uri + ".error", str(exc))  # the operator raises this one line
        return 1
    finally:
        if owned:
            spark.stop()
    return 0


if __name__ == "__main__":
    # Run through the importable module (not this file's ``__main__`` copy) so the functions
    # shipped to executors are pickled by reference to the installed package.
    from airflow_colocate.spark import write_job as _job

    sys.exit(_job.main())
