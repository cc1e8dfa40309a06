"""Colocated join vs (a) plain Spark shuffle sort-merge join and (b) Spark's own bucketed tables,
on TPC-H orders ⋈ lineitem (order key) with an aggregation, side by side in one run; and ours with
the on-read bucket guard (the default: every row's bucket and every parquet page's checksum
checked) against ours without it.

    .venv/bin/python bench/bench_join.py [--scale 1] [--buckets 16] [--rounds 3]
    .venv/bin/python bench/bench_join.py --scale 1 --rounds 3 --jfr /tmp/jfr   # the join's CPU profile

All run the same query in the same Spark session with broadcast joins off. Ours includes
planning and registering the tables (what ColocateJoinOperator does minus spark-submit start-up).
Also times registering 30 partitions x 64 buckets. Targets: ours >= 1.5x faster than (a); ours
no slower than 0.95x of (b) (i.e. time(b)/time(ours) >= 0.95); registration < 3 s; the guard
costs <= 5% (it is on by default only then). And the physical limit: ours <= 1.5x a plain scan of
the columns the join reads, through the same registered views (issue 15).

``--jfr DIR`` times nothing else: it records a Java Flight Recording of each run of the colocated
merge join with the columnar operator off and on and of the plain scan (interleaved, ``--rounds``
each), and prints where the task threads' CPU samples go: parquet decode, the bucket guard, the
merge, the output batches, ColumnarToRow and the aggregate, other (issue 32).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpch import tpch  # noqa: E402

from airflow_colocate.catalog import Catalog  # noqa: E402
from airflow_colocate.core.contract import ReadPartition, ReadTable, Source  # noqa: E402
from airflow_colocate.jobs.join import finish_join, join_in_session, prepare_join  # noqa: E402
from airflow_colocate.jobs.write import write_in_session  # noqa: E402
from airflow_colocate.spark.join_job import run_join  # noqa: E402
from airflow_colocate.spark.register import register_tables  # noqa: E402
from airflow_colocate.spark.session import get_spark  # noqa: E402

# the columns QUERY reads from each input, counted: reading both sides once, no join
SCAN = ("SELECT (SELECT count(o_orderkey) + count(o_orderpriority) FROM {orders}) + (SELECT count(l_orderkey) + "
        "count(l_extendedprice) + count(l_discount) FROM {lineitem})")
QUERY = ("SELECT o_orderpriority, count(*) AS lines, sum(l_extendedprice * (1 - l_discount)) AS revenue "
         "FROM {orders} JOIN {lineitem} ON o_orderkey = l_orderkey GROUP BY o_orderpriority")


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def task_cpu(spark, fn) -> tuple[float, float]:
    """(wall seconds, executor CPU seconds) of ``fn``: the CPU time Spark's tasks report for the jobs
    ``fn`` started (its status API; told apart by job id, since the join job sets its own job group).
    On a machine other work shares, wall time swings by half; the tasks' own CPU time barely moves,
    so a few percent of difference between two variants shows there."""
    sc = spark.sparkContext
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    before = max((j["jobId"] for j in json.load(urlopen(f"{api}/jobs"))), default=-1)
    wall = timed(fn)
    for _ in range(50):  # the status store takes the last task ends a moment after the job returns
        jobs = [j for j in json.load(urlopen(f"{api}/jobs")) if j["jobId"] > before]
        if all(j["status"] != "RUNNING" for j in jobs):
            break
        time.sleep(0.1)
    cpu = 0
    for sid in {sid for j in jobs for sid in j["stageIds"]}:
        try:
            cpu += sum(st.get("executorCpuTime", 0) for st in json.load(urlopen(f"{api}/stages/{sid}")))
        except OSError:  # a skipped stage (its shuffle reused) has no attempt
            pass
    return wall, cpu / 1e9


# Where a task thread's CPU sample goes: the first of its frames (top down) that one of these patterns
# names; a sample none names is "other" (Spark's task machinery). A frame of a JDK or column-vector
# class names nothing, so it counts for its caller (an OnHeapColumnVector.getLong under the parquet
# reader is decode, under the merge is the merge; an UnsafeRow's, under Spark's join, the merge). Spark's
# own join runs in generated code: its smj_ methods are the merge, the rest of a generated stage
# (processNext: the rows' loop) is ColumnarToRow and the aggregate.
PROFILE = (
    # a sort's frames: matched by no category before, their samples fell to the generated stage below them
    ("sort", (r"^org\.apache\.spark\.util\.collection\.unsafe\.sort\.|^org\.apache\.spark\.sql\.execution\."
              r"(SortExec|UnsafeExternalRowSorter|SortPrefixUtils)|GeneratedClass\$\w+\.sort_")),
    ("bucket guard", (r"^colocate\.ordered\.BucketGuard|^org\.apache\.spark\.unsafe\.hash\.Murmur3|"
                      r"expressions\.(Murmur3Hash|Pmod)")),
    ("output batches (copies, or reads through PickedVector)",
     r"^colocate\.ordered\.(Vectors\.gather|ColumnarMerge\$Merge\.flush|PickedVector)"),
    ("merge", (r"^colocate\.ordered\.|^org\.apache\.spark\.sql\.execution\.joins\.|ExternalAppendOnlyUnsafeRowArray|"
               r"GeneratedClass\$\w+\.smj_")),
    ("parquet decode", (r"^org\.apache\.parquet\.|\.datasources\.parquet\.|^org\.xerial\.snappy|^com\.github\.luben|"
                        r"^io\.airlift\.compress|^org\.apache\.hadoop\.|^colocate\.locality\.|FileScanRDD|"
                        r"RecordReaderIterator|^org\.apache\.iceberg\.(parquet|arrow|spark\.data\.vectorized|spark\.source)\.|"
                        r"^org\.apache\.arrow\.")),
    ("ColumnarToRow + aggregate", (r"GeneratedClass\$GeneratedIteratorForCodegenStage|\.execution\.aggregate\.|"
                                   r"\.types\.Decimal|^java\.math\.|^org\.apache\.spark\.unsafe\.map\.|"
                                   r"UnsafeFixedWidthAggregationMap|ColumnarToRow")),
)


def jfr_start(spark, period_ms: int = 2):
    """A flight recording of the driver JVM (local mode: the executors' too) sampling Java and native
    stacks every ``period_ms``; the native samples catch the parquet pages' decompression."""
    jvm = spark.sparkContext._jvm
    rec = jvm.jdk.jfr.Recording()
    for event in ("jdk.ExecutionSample", "jdk.NativeMethodSample"):
        rec.enable(event).withPeriod(jvm.java.time.Duration.ofMillis(period_ms))
    rec.start()
    return rec


def jfr_stop(spark, rec, path: Path) -> None:
    rec.stop()
    rec.dump(spark.sparkContext._jvm.java.io.File(str(path)).toPath())
    rec.close()


def jfr_shares(paths: list[Path]) -> tuple[dict[str, int], int]:
    """Samples of the tasks' threads per PROFILE category over ``paths`` (with ``jfr print``)."""
    tool = shutil.which("jfr", path=f"{os.environ.get('JAVA_HOME', '')}/bin:{os.environ.get('PATH', '')}")
    if tool is None:
        raise SystemExit("bench_join: --jfr needs the JDK's jfr tool (on PATH or in $JAVA_HOME/bin)")
    patterns = [(name, re.compile(rx)) for name, rx in PROFILE]
    counts: dict[str, int] = {name: 0 for name, _ in PROFILE} | {"other": 0}
    total = 0
    for path in paths:
        out = subprocess.run([tool, "print", "--json", "--events", "jdk.ExecutionSample,jdk.NativeMethodSample",
                              str(path)], capture_output=True, text=True, check=True).stdout
        for event in json.loads(out)["recording"]["events"]:
            values = event["values"]
            thread = (values.get("sampledThread") or {}).get("javaName") or ""
            if not thread.startswith("Executor task"):  # "launch worker for task N", "idle worker#N" once done
                continue
            frames = [f"{f['method']['type']['name']}.{f['method']['name']}".replace("/", ".")
                      for f in (values.get("stackTrace") or {}).get("frames", [])]
            name = next((n for frame in frames for n, rx in patterns if rx.search(frame)), "other")
            counts[name] += 1
            total += 1
    return counts, total


def registration_seconds(spark, work: Path, partitions: int = 30, buckets: int = 64) -> float:
    parts = []
    for p in range(partitions):
        paths = []
        for b in range(buckets):
            d = work / "reg" / f"p{p}" / f"b{b:05d}"
            d.mkdir(parents=True)
            paths.append(d.as_uri())
        parts.append(ReadPartition(value=f"2026-10-{p + 1:02d}", bucket_paths=paths))
    table = ReadTable(name="reg_probe", columns=[["k", "bigint"], ["v", "string"], ["dt", "date"]], dist_cols=["k"],
                      partition_cols=["dt"], bucket_num=buckets, partitions=parts)
    return timed(lambda: register_tables(spark, [table]))


def profile_runs(spark, variants: dict, rounds: int, out: Path, title: str) -> None:
    """The ``variants`` (name -> a function running it) interleaved, one flight recording per run into
    ``out``; prints each variant's task CPU (median of all runs) and its samples' shares per PROFILE
    category over all but its first run, and that share of its task CPU. bench_seeds' --jfr uses it too."""
    out.mkdir(parents=True, exist_ok=True)
    for fn in variants.values():  # warm-up: compiled code and the status store, outside the recordings
        task_cpu(spark, fn)
    files: dict[str, list[Path]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    for i in range(rounds):
        order = list(variants) if i % 2 == 0 else list(variants)[::-1]
        for v in order:
            rec = jfr_start(spark)
            _, seconds = task_cpu(spark, variants[v])
            path = out / f"{re.sub(r'[^a-z0-9]+', '-', v.lower()).strip('-')}-{i}.jfr"
            jfr_stop(spark, rec, path)
            files[v].append(path)
            cpu[v].append(seconds)
    print(f"{title}: task threads' CPU samples (JFR, Java + native, every 2 ms), {rounds} runs each, interleaved, "
          f"shares of all but the first; {out}")
    for v, paths in files.items():
        counts, total = jfr_shares(paths[1:] or paths)  # the first run of each still warms up (2-5x slower)
        median = sorted(cpu[v])[len(cpu[v]) // 2]
        parts = ", ".join(f"{name} {n / max(total, 1):.0%} ({median * n / max(total, 1):.2f} s)"
                          for name, n in counts.items() if n)
        print(f"{v}: task CPU {median:.2f} s (median; runs {', '.join(f'{t:.2f}' for t in cpu[v])}), "
              f"{total} samples: {parts}")


def profile(spark, a, run_join_variant, run_scan) -> None:
    """--jfr: Spark's merge join, the columnar one and the plain scan, profiled by profile_runs."""
    variants = {"columnar off (Spark's merge join)": lambda: run_join_variant(False),
                "columnar on": lambda: run_join_variant(True), "plain scan": run_scan}
    profile_runs(spark, variants, a.rounds, a.jfr, f"TPC-H sf{a.scale:g} orders JOIN lineitem + aggregation, "
                 f"{a.buckets} buckets, master {a.master}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--columnar", choices=["on", "off", "both"], default="off",
                    help="ours with the jar's columnar merge join (spark.colocate.join.columnar) on, off, or both: "
                         "the sort-merge variant (ours_smj) run with it on as 'ours_columnar', side by side")
    ap.add_argument("--jfr", type=Path, metavar="DIR",
                    help="profile instead of timing: a flight recording per run of the merge join with the columnar "
                         "operator off and on and of the plain scan (--rounds each, interleaved) into DIR, and the "
                         "task threads' CPU samples per category")
    a = ap.parse_args()
    if a.jfr and a.columnar != "off":
        ap.error("--jfr records the operator off and on itself: leave --columnar out")
    orders_src, lineitem_src = str(tpch("orders", a.scale)), str(tpch("lineitem", a.scale))
    work = Path(tempfile.mkdtemp(prefix="bench-join-"))
    # the UI's status API reports the tasks' CPU time (task_cpu)
    spark = get_spark("bench-join", a.master, {"spark.ui.enabled": "true", "spark.ui.showConsoleProgress": "false",
                                                "spark.sql.autoBroadcastJoinThreshold": "-1",
                                                "spark.sql.warehouse.dir": (work / "warehouse").as_uri()})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        cols = {name: [(f.name, f.dataType.simpleString()) for f in spark.read.parquet(src).schema.fields]
                for name, src in (("orders", orders_src), ("lineitem", lineitem_src))}
        # ours: a colocation group of the two tables
        cat = Catalog(f"sqlite:///{work / 'catalog.db'}", actor="bench")
        cat.init()
        for i in range(1, 4):
            (work / f"be{i}").mkdir()
            cat.backends.add((work / f"be{i}").as_uri(), name=f"be{i}")
        for name, key, src in (("orders", "o_orderkey", orders_src), ("lineitem", "l_orderkey", lineitem_src)):
            cat.tables.create(name, cols[name], [key], bucket_num=a.buckets, replication_num=1, colocate_with="g_tpch")
            write_in_session(spark, cat, name, "all", Source(format="parquet", path=src), work_dir=work / "runs")
        # (b): Spark's own bucketed tables of the same data
        for name, key, src in (("orders", "o_orderkey", orders_src), ("lineitem", "l_orderkey", lineitem_src)):
            if a.jfr:
                break
            spark.read.parquet(src).write.bucketBy(a.buckets, key).sortBy(key).mode("overwrite").saveAsTable(f"sb_{name}")
        # (a): plain files
        spark.read.parquet(orders_src).createOrReplaceTempView("plain_orders")
        spark.read.parquet(lineitem_src).createOrReplaceTempView("plain_lineitem")

        tables = {"orders": None, "lineitem": None}
        ours_q = QUERY.format(orders="orders", lineitem="lineitem")
        check = join_in_session(spark, cat, ours_q, tables, work_dir=work / "runs", require_colocate=True)
        assert check["colocate"], check["explain"]

        def run_ours(guard: bool = True, hash_budget: int | None = None, columnar: bool = False):
            """join_in_session, with the guard on (the default) or off; ``hash_budget=0`` forces the
            sort-merge join (over the buckets' key-sorted files, read in order: no sort); ``columnar``:
            the jar's columnar merge join in its place (else as ``--columnar`` says)."""
            spark.conf.set("spark.colocate.join.columnar", str(columnar or a.columnar == "on").lower())
            plan, ticket = prepare_join(cat, ours_q, tables, work_dir=work / "runs", hash_budget=hash_budget)
            for t in plan.tables:
                t.bucket_guard = guard
            finish_join(cat, ticket, run_join(spark, plan))

        def run_plain():
            spark.sql(QUERY.format(orders="plain_orders", lineitem="plain_lineitem")).count()

        def run_scan():
            spark.sql(SCAN.format(orders="orders", lineitem="lineitem")).collect()

        def run_bucketed():
            spark.sql(QUERY.format(orders="sb_orders", lineitem="sb_lineitem")).count()

        reference = sorted(spark.sql(QUERY.format(orders="plain_orders", lineitem="plain_lineitem")).collect())
        assert sorted(spark.sql(ours_q).collect()) == reference, "colocated join returned other rows"
        if a.jfr:
            profile(spark, a, lambda columnar: run_ours(hash_budget=0, columnar=columnar), run_scan)
            return
        results: dict[str, list[float]] = {"ours": [], "plain": [], "bucketed": [], "unguarded": [], "scan": [],
                                           "ours_smj": []}
        cpu: dict[str, list[float]] = {"ours": [], "unguarded": [], "scan": [], "ours_smj": []}
        if a.columnar == "both":
            results["ours_columnar"], cpu["ours_columnar"] = [], []
        for i in range(a.rounds):  # interleaved so drift hits every variant alike
            results["plain"].append(timed(run_plain))
            results["bucketed"].append(timed(run_bucketed))
            wall, seconds = task_cpu(spark, run_scan)  # the views of the last run_ours (guarded)
            results["scan"].append(wall)
            cpu["scan"].append(seconds)
            guard_first = i % 2 == 0  # and the two guard variants alternate who goes first
            for guard in (guard_first, not guard_first):
                wall, seconds = task_cpu(spark, lambda: run_ours(guard))
                results["ours" if guard else "unguarded"].append(wall)
                cpu["ours" if guard else "unguarded"].append(seconds)
            variants = [False, True] if a.columnar == "both" else [False]
            for columnar in variants if i % 2 == 0 else variants[::-1]:  # the columnar join, on vs off
                wall, seconds = task_cpu(spark, lambda: run_ours(hash_budget=0, columnar=columnar))
                results["ours_columnar" if columnar else "ours_smj"].append(wall)
                cpu["ours_columnar" if columnar else "ours_smj"].append(seconds)
        best = {k: min(v) for k, v in results.items()}
        median = {k: sorted(v)[len(v) // 2] for k, v in {**results, **{f"cpu_{k}": v for k, v in cpu.items()}}.items()}
        reg = registration_seconds(spark, work)
        print(f"TPC-H sf{a.scale:g} orders JOIN lineitem + aggregation, {a.buckets} buckets, master {a.master}, best of {a.rounds}")
        print(f"colocated join (plan + register + run): {best['ours']:.2f} s; explain: {check['explain'].splitlines()[0]}")
        print(f"(a) plain Spark shuffle sort-merge join: {best['plain']:.2f} s  -> ours is {best['plain'] / best['ours']:.2f}x faster (target >= 1.5x)")
        print(f"(b) Spark bucketed tables (bucketBy):    {best['bucketed']:.2f} s  -> ours at {best['bucketed'] / best['ours']:.2f}x of (b) (target >= 0.95x)")
        print(f"plain scan of the joined columns (same views): {best['scan']:.2f} s -> ours at "
              f"{best['ours'] / best['scan']:.2f}x of the scan (target <= 1.5x); task CPU {median['cpu_ours']:.2f} s vs "
              f"{median['cpu_scan']:.2f} s ({median['cpu_ours'] / median['cpu_scan']:.2f}x); explain: "
              f"{check['explain'].splitlines()[-1]}")
        print(f"ours with the sort-merge join forced (hash budget 0): {best['ours_smj']:.2f} s, task CPU "
              f"{median['cpu_ours_smj']:.2f} s, against the join job's own choice {best['ours']:.2f} s, "
              f"{median['cpu_ours']:.2f} s")
        if a.columnar == "both":
            print(f"columnar merge join (ours_smj with spark.colocate.join.columnar=true): {best['ours_columnar']:.2f} s, "
                  f"task CPU {median['cpu_ours_columnar']:.2f} s, against Spark's merge join {best['ours_smj']:.2f} s, "
                  f"{median['cpu_ours_smj']:.2f} s -> x{best['ours_smj'] / best['ours_columnar']:.2f} wall, "
                  f"x{median['cpu_ours_smj'] / median['cpu_ours_columnar']:.2f} task CPU (target >= 1.3x); "
                  f"{best['ours_columnar'] / best['scan']:.2f}x the scan (task CPU "
                  f"{median['cpu_ours_columnar'] / median['cpu_scan']:.2f}x)")
        print(f"register 30 partitions x 64 buckets: {reg:.2f} s (target < 3 s)")
        wall_cost = best["ours"] / best["unguarded"] - 1
        cpu_cost = median["cpu_ours"] / median["cpu_unguarded"] - 1
        print(f"bucket guard (row buckets + page checksums), on vs off: task CPU {median['cpu_ours']:.2f} s vs "
              f"{median['cpu_unguarded']:.2f} s -> costs {cpu_cost:+.1%} (median of {a.rounds}; target <= 5%, on by "
              f"default); wall {best['ours']:.2f} s vs {best['unguarded']:.2f} s ({wall_cost:+.1%}, best of {a.rounds})")
        print("rounds, wall s: " + "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in results.items()))
        print("rounds, task CPU s: " + "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in cpu.items()))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
