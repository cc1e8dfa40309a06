"""The bulk-import job: load many partitions of a Hive-style dataset with ONE Spark job.

Launch (through :mod:`airflow_colocate.spark.entry`)::

    spark-submit [--master …] /…/airflow_colocate/spark/entry.py --kind import --plan file:///path/plan.json

:func:`run_import` reads every planned ``<col>=<value>`` folder at once, checks the schema against
the table (as a write does, :func:`~airflow_colocate.spark.write_job.conform`), buckets all rows
with ``repartition(n, dist cols)`` — task b holds bucket b of every partition — and writes them
``partitionBy(col)``: one staged file per (partition, bucket). Then it places every bucket of every
partition with the write path's own :func:`~airflow_colocate.storage.place.place_bucket` (rename,
checksum-verified copies) and writes each partition's report as soon as all its buckets are
placed. A partition whose placement fails is reported as failed and the others go on: the control
plane commits each placed partition and none of the failed ones. The job never touches the catalog.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from urllib.parse import quote

from airflow_colocate.core.contract import ImportPlan, ImportReport, WriteReport
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.sqltypes import comparable_type, widening_ok
from airflow_colocate.spark import write_job
from airflow_colocate.spark.failures import first_line, is_spark_error, one_line
from airflow_colocate.spark.session import scoped
from airflow_colocate.spark.shipping import ship_context
from airflow_colocate.storage import fs
from airflow_colocate.storage import place as placement
from airflow_colocate.storage.plan_files import save_report

log = logging.getLogger("airflow_colocate.spark.import")  # shown as colocate-import: … (spark.entry)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class Progress:
    """'placed k of N partitions, bytes, about T s left' lines, at most one every few seconds."""

    def __init__(self, total: int, every: float = 2.0):
        self.total, self.every, self.done, self.bytes = total, every, 0, 0
        self.started = self.last = time.perf_counter()

    def add(self, size: int, *, force: bool = False) -> None:
        self.done += 1
        self.bytes += size
        now = time.perf_counter()
        if force or self.done == self.total or now - self.last >= self.every:
            self.last = now
            left = (now - self.started) / self.done * (self.total - self.done)
            log.info(f"placed {self.done} of {self.total} partitions, {_size(self.bytes)}, about {left:.0f} s left")


def _watch_stage(sc, group: str, stop: threading.Event, every: float = 5.0) -> None:
    """Log the bucketing stage's tasks done of total and a time estimate while it runs."""
    started = time.perf_counter()
    tracker = sc.statusTracker()
    while not stop.wait(every):
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job else []):
                info = tracker.getStageInfo(stage_id)
                if info:
                    done, total = done + info.numCompletedTasks, total + info.numTasks
        if total:
            spent = time.perf_counter() - started
            left = spent / done * (total - done) if done else float("nan")
            log.info(f"bucketing: {done} of {total} tasks done, about {left:.0f} s left")


def read_all(spark, plan: ImportPlan):
    """Every planned partition folder as one DataFrame, the partition column as a string."""
    fmt = plan.format.lower()
    if fmt not in ("parquet", "orc"):
        raise ColocateError(f"import source format {plan.format!r} is not supported: use parquet or orc")
    folders = [p.folder for p in plan.partitions]
    # the folder names, exactly: the catalog's partition values
    with scoped(spark, {"spark.sql.sources.partitionColumnTypeInference.enabled": "false"}):
        try:
            # partitions written under different schema versions: the union of their columns (a
            # column missing from a partition reads as null), as a read across schema versions does
            df = spark.read.format(fmt).option("basePath", plan.root).option("mergeSchema", "true").load(folders)
        except Exception as exc:
            if not is_spark_error(exc) or "merge" not in str(exc).lower():
                raise
            df = _read_widened(spark, plan, fmt, folders)
    log.info(f"source: {fmt} {plan.root}, {len(plan.partitions)} partition folders")
    return df


def _read_widened(spark, plan: ImportPlan, fmt: str, folders: list[str]):
    """Partitions whose types differ (a column widened, int in old folders and bigint in new):
    each group of folders with one schema read on its own, every column cast to the widest of its
    types (:func:`widening_ok`), and the groups unioned by name. Types no widening joins are
    refused with one line naming the column, its types and a folder of each."""
    from pyspark.sql import functions as F

    groups: dict[str, tuple[object, list[str]]] = {}
    for folder in folders:
        schema = spark.read.format(fmt).option("basePath", plan.root).load(folder).schema
        groups.setdefault(schema.simpleString(), (schema, []))[1].append(folder)
    types: dict[str, dict[str, str]] = {}  # lower name -> type -> a folder
    names: dict[str, str] = {}
    for schema, group in groups.values():
        for f in schema.fields:
            names.setdefault(f.name.lower(), f.name)
            types.setdefault(f.name.lower(), {}).setdefault(comparable_type(f.dataType.simpleString()), group[0])
    widest: dict[str, str] = {}
    for key, seen in types.items():
        best = next((t for t in seen if all(widening_ok(o, t) for o in seen)), None)
        if best is None:
            raise ColocateError(f"import of {plan.root}: column {names[key]!r} has types no lossless widening joins: "
                                + ", ".join(f"{t} (e.g. {folder})" for t, folder in seen.items())
                                + "; rewrite the partitions of one type, or import them separately")
        widest[key] = best
    out = None
    for schema, group in groups.values():
        df = spark.read.format(fmt).option("basePath", plan.root).load(group)
        have = {f.name.lower(): f for f in schema.fields}
        cols = [(F.col(f"`{have[k].name}`").cast(t) if k in have else F.lit(None).cast(t)).alias(names[k])
                for k, t in widest.items()]
        df = df.select(*cols)
        out = df if out is None else out.unionByName(df)
    log.info(f"source: {len(groups)} schemas among {len(folders)} partition folders, merged by widening")
    return out


def stage_all(spark, plan: ImportPlan, out) -> dict[str, dict[int, list[str]]]:
    """Bucket every row and write one file per (partition, bucket); partition value -> staged buckets."""
    first = plan.partitions[0].plan
    cols = {c[0].lower(): c[0] for c in first.columns}
    dist = [cols[c.lower()] for c in first.dist_cols]
    pcol = cols[plan.partition_col.lower()]
    sc = spark.sparkContext
    group = sc.getLocalProperty("spark.jobGroup.id")  # a caller's group (a benchmark counting jobs) is kept
    job_group = None
    if group is None:
        group = f"colocate-import-{plan.job_id}"
        job_group = (group, f"colocate-import bucket {plan.table} ({len(plan.partitions)} partitions)")
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_stage, args=(sc, group, stop), daemon=True)
    count = first.layout_buckets or first.bucket_num  # after a group split: the finer layout (storage.place.families)
    if any((p.plan.layout_buckets or p.plan.bucket_num) != count for p in plan.partitions):
        raise ColocateError(f"importing {plan.table}: its partitions have different bucket layouts; import them "
                            f"in separate runs")
    log.info(f"bucketing by pmod(hash({', '.join(dist)}), {count}) into {plan.staging_uri}")
    buckets_uri = fs.join(plan.staging_uri, "buckets")
    watcher.start()
    try:
        # One file per bucket holding every partition's rows of that bucket, sorted by partition
        # (Spark's per-file cost paid n times, not n x partitions times) and then by the bucket key,
        # as a write sorts it: the write's own staging, then cut per partition (split_bucket).
        by_bucket = write_job.write_buckets(
            spark, out, dist, count, buckets_uri, sort_first=(pcol,),
            # what pyarrow writes back unchanged (INT96 it would not)
            conf={"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}, job_group=job_group,
            failing=f"importing {plan.table} failed while reading or bucketing the source")
    finally:
        stop.set()
    tasks = [{"bucket": b, "files": files, "column": pcol, "out": fs.join(plan.staging_uri, "split")}
             for b, files in sorted(by_bucket.items())]
    staged: dict[str, dict[int, list[str]]] = {}
    for result in _run_tasks(sc, split_bucket, tasks):
        for value, uris in result.items():
            staged.setdefault(value, {}).setdefault(uris[0], []).extend(uris[1])
    log.info(f"staged {sum(len(f) for b in staged.values() for f in b.values())} files for {len(staged)} partitions")
    return staged


def _run_tasks(sc, fn, tasks: list) -> list:
    """``fn`` over ``tasks`` (:func:`~airflow_colocate.spark.write_job.on_executors`), an executor's
    failure as its own one line."""
    with one_line(executor=True):
        return write_job.on_executors(sc, fn, tasks)


def split_bucket(task: dict) -> dict[str, tuple[int, list[str]]]:
    """Executor side: cut one bucket's staged files (sorted by the partition column) into one parquet
    file per partition, without the partition column, as Spark's ``partitionBy`` would have written
    them; returns partition value -> (bucket, [file URIs]). Streams record batches: a bucket of
    years of history never has to fit in memory."""
    import json

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    bucket, column = task["bucket"], task["column"]
    out: dict[str, tuple[int, list[str]]] = {}
    for k, uri in enumerate(task["files"]):
        with fs.open_read(uri) as f:
            reader = pq.ParquetFile(f)
            schema = reader.schema_arrow
            idx = schema.get_field_index(column)
            keep = [i for i in range(len(schema)) if i != idx]
            meta = dict(schema.metadata or {})
            spark_key = b"org.apache.spark.sql.parquet.row.metadata"
            if spark_key in meta:  # Spark's own schema, without the partition column
                row = json.loads(meta[spark_key])
                row["fields"] = [fld for fld in row["fields"] if fld["name"] != column]
                meta[spark_key] = json.dumps(row).encode()
            target = schema.remove(idx).with_metadata(meta)
            current, writer, sink = None, None, None
            try:
                for batch in reader.iter_batches(batch_size=65536):
                    values = batch.column(idx)
                    for value in pc.unique(values).to_pylist():
                        if value != current:
                            if writer is not None:
                                writer.close()
                                sink.close()
                            name = f"part-{bucket:05d}-split{k}.c000.snappy.parquet"
                            path = fs.join(fs.join(task["out"], f"{column}={quote(value, safe='')}"), name)
                            if value in out and path in out[value][1]:
                                raise ColocateError(f"staged bucket file {uri} is not sorted by {column}")
                            fs.makedirs(fs.parent(path))
                            sink = fs.open_write(path)
                            writer = pq.ParquetWriter(sink, target, compression="snappy")
                            out.setdefault(value, (bucket, []))[1].append(path)
                            current = value
                        part = batch.filter(pc.equal(values, value)) if len(values) else batch
                        writer.write_table(pa_table(part, keep, target))
            finally:
                if writer is not None:
                    writer.close()
                    sink.close()
    return out


def pa_table(batch, keep: list[int], target):
    import pyarrow as pa

    return pa.Table.from_arrays([batch.column(i) for i in keep], schema=target)


def _place_safely(item: tuple[int, dict]) -> tuple[int, int, list[dict] | str]:
    """Place one bucket of one partition; a failure is returned (partition index, bucket, reason),
    so it fails that partition only."""
    index, task = item
    try:
        return index, task["bucket"], placement.place_bucket(task)
    except Exception as exc:  # noqa: BLE001 - reported per partition, never committed
        return index, task["bucket"], f"bucket {task['bucket']}: {type(exc).__name__}: {exc}"


def place_all(spark, plan: ImportPlan, staged: dict[str, dict[int, list[str]]],
              on_partition=None) -> tuple[list[WriteReport], dict[str, str]]:
    """Place every bucket of every partition; write (and hand ``on_partition``) each partition's
    report as soon as all its buckets are placed. Returns the reports and the failed partitions."""
    items = [(i, task) for i, p in enumerate(plan.partitions)
             for task in placement.bucket_tasks(p.plan, staged.get(p.value, {}))]
    sc = spark.sparkContext
    threads = max(1, sc.defaultParallelism)
    waiting = {i: len(p.plan.buckets) for i, p in enumerate(plan.partitions)}
    placed: dict[int, list[dict]] = {i: [] for i in waiting}
    failed: dict[str, str] = {}
    reports: dict[int, WriteReport] = {}
    progress = Progress(len(plan.partitions))
    started = time.time()

    def finished(index: int) -> None:
        part = plan.partitions[index]
        if part.value in failed:
            progress.add(0)
            return
        try:
            replicas, rows = placement.placed_replicas(part.plan, placed[index])
        except ColocateError as exc:
            failed[part.value] = str(exc)
            progress.add(0)
            return
        report = WriteReport(job_id=part.plan.job_id, table=part.plan.table, partition_value=part.value,
                             version=part.plan.version, source_rows=rows, replicas=replicas,
                             seconds=round(time.time() - started, 3), spark_version=spark.version)
        save_report(report, plan.part_report_uri(index))
        reports[index] = report
        if on_partition is not None:
            on_partition(report)
        progress.add(sum(r.bytes for r in replicas))

    def take(index: int, bucket: int, result) -> None:
        if isinstance(result, str):
            failed.setdefault(plan.partitions[index].value, result)
        else:
            placed[index].extend(result)
        waiting[index] -= 1
        if waiting[index] == 0:
            finished(index)

    with scoped(spark, description=f"colocate-import place {plan.table} ({len(plan.partitions)} partitions)"):
        if sc.master.startswith("local"):
            # This machine's threads (see write_job.on_executors), in partition order, so that each
            # partition's report is written (and committed in session) as soon as it is complete.
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                for index, bucket, result in pool.map(_place_safely, items):
                    take(index, bucket, result)
        else:
            slices = max(1, min(len(items), threads * 4))
            ship_context(sc)  # _place_safely is this package's: the cluster may not have it
            for index, bucket, result in sc.parallelize(items, slices).map(_place_safely).toLocalIterator():
                take(index, bucket, result)
    for value, reason in failed.items():
        log.info(f"partition {value} NOT placed: {reason}")
    return [reports[i] for i in sorted(reports)], failed


def run_import(spark, plan: ImportPlan, on_partition=None) -> ImportReport:
    """Execute ``plan``; ``on_partition(report)`` is called for each placed partition (in session,
    the control plane commits it there and then)."""
    started = time.time()
    if not plan.partitions:
        raise ColocateError(f"import plan {plan.job_id} for {plan.table} has no partitions")
    first = plan.partitions[0].plan
    for p in plan.partitions:
        write_job.check_plan(p.plan)
    log.info(f"job {plan.job_id}: {len(plan.partitions)} partitions of {plan.table} into {first.bucket_num} buckets")
    values = [p.value for p in plan.partitions]
    span = replace(first, partition_value=values[0] if len(values) == 1 else f"{min(values)}…{max(values)}")
    try:
        out = write_job.conform(spark, read_all(spark, plan), span, keep_partition=True)
    except ColocateError as exc:
        raise type(exc)(f"import of {plan.root}: {exc}") from exc
    except Exception as exc:
        if is_spark_error(exc):
            raise ColocateError(f"reading the import source {plan.root} failed: {first_line(exc)}") from exc
        raise
    staged = stage_all(spark, plan, out)
    reports, failed = place_all(spark, plan, staged, on_partition)
    fs.delete_tree(plan.staging_uri)
    log.info(f"placed {len(reports)} partitions, {len(failed)} failed, in {time.time() - started:.1f}s")
    return ImportReport(job_id=plan.job_id, table=plan.table, reports=reports, failed=failed,
                        seconds=round(time.time() - started, 3), spark_version=spark.version)

