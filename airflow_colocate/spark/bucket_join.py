"""How the colocated joins of a join job join inside a bucket: a hash join or the sort-merge join,
decided on the Spark driver because it needs what only the running Spark knows. The memory one
task may give a bucket's build side comes from the cluster's Spark conf (:func:`hash_budget`),
which the control plane does not see; whether the ordered read or the query's shape makes the
sort-merge join the faster one is read from the query as Spark's parser sees it
(:func:`hash_or_not`). What the catalog knows of the buckets (sizes, files, read orders) was
worked out before the job was submitted and travels in the plan (``JoinPlan.bucket_facts``).
"""

from __future__ import annotations

import logging
import os
import re
import weakref
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace

from airflow_colocate.core.contract import BucketFacts, BucketJoin, JoinPlan
from airflow_colocate.core.sizes import human_bytes, parse_size
from airflow_colocate.spark import locality
from airflow_colocate.spark.connect import is_connect
from airflow_colocate.spark.connect import master as connect_master
from airflow_colocate.spark.physical_plan import query_shape
from airflow_colocate.spark.read_order import keys_in_read_order
from airflow_colocate.spark.timing import DriverClock

log = logging.getLogger("airflow_colocate.spark.join")  # the join job's lines (colocate-join: …)

MIB = 1 << 20
RESERVED_MEMORY = 300 * MIB  # Spark's reserved system memory, outside spark.memory.fraction
DEFAULT_SAFETY = 0.5  # of the unified (execution + storage) memory one task may use for one bucket
HASH = "hash"
SORT_MERGE = "sort-merge"


def default_hash_budget(memory: str, cores: int, fraction: float = 0.6, safety: float = DEFAULT_SAFETY) -> int:
    """The memory one task may give the build side of one bucket:
    ``(executor memory - 300 MiB reserved) x spark.memory.fraction x safety / executor cores``
    (``memory``: spark.executor.memory, or spark.driver.memory in local mode; ``cores``: tasks run
    at once in one executor). Execution memory is shared by the tasks running at once; the safety
    factor leaves room for the streamed side's buffers, the other operators and the estimate's error."""
    usable = max(parse_size(memory, "executor memory") - RESERVED_MEMORY, 0)
    return int(usable * fraction * safety / max(cores, 1))


HASH_BUDGET_CONF = "spark.colocate.join.hashBudget"


def hash_budget(spark, plan: JoinPlan) -> tuple[int, str]:
    """The bytes one task may give one bucket's hash-join build side, and where that came from: the
    plan (the operator's ``hash_budget``), else the session's ``spark.colocate.join.hashBudget``,
    else :func:`default_hash_budget` of this session's memory and cores."""
    if plan.hash_budget is not None:
        return plan.hash_budget, "the join's hash_budget"
    # Spark Connect has no SparkContext: the server's settings are read through spark.conf
    conf = spark.conf if is_connect(spark) else _context_conf(spark.sparkContext)
    configured = spark.conf.get(HASH_BUDGET_CONF, None) or conf.get(HASH_BUDGET_CONF, None)
    if configured:
        return parse_size(configured, HASH_BUDGET_CONF), HASH_BUDGET_CONF
    local = connect_master(spark).startswith("local")
    memory_key = "spark.driver.memory" if local else "spark.executor.memory"
    memory = conf.get(memory_key, "1g")
    cores = int(conf.get("spark.executor.cores", "0") or 0) if not local else 0
    if not cores and is_connect(spark):
        cores = int(conf.get("spark.default.parallelism", None) or 0) or _local_cores(connect_master(spark))
    cores = cores or spark.sparkContext.defaultParallelism
    fraction = float(conf.get("spark.memory.fraction", "0.6"))
    budget = default_hash_budget(memory, cores, fraction)
    return budget, f"({memory_key} {memory} - 300 MiB) x {fraction:g} x safety 0.5 / {cores} cores"


# A running SparkContext's SparkConf never changes: read the keys the budget needs once per context
# (getConf() copies the whole conf through py4j, tens of ms of every query's planning).
_CONTEXT_CONF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CONTEXT_KEYS = (HASH_BUDGET_CONF, "spark.driver.memory", "spark.executor.memory", "spark.executor.cores",
                 "spark.memory.fraction", "spark.default.parallelism")


def _context_conf(sc) -> dict[str, str]:
    if sc not in _CONTEXT_CONF:
        conf = sc.getConf()
        _CONTEXT_CONF[sc] = {k: v for k in _CONTEXT_KEYS if (v := conf.get(k, None)) is not None}
    return _CONTEXT_CONF[sc]


def _local_cores(master: str) -> int:
    """The cores of a ``local[n]`` master (``local[*]``, ``local``: this machine's, at least 1)."""
    m = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", master)
    return int(m[1]) if m else (os.cpu_count() or 1)


def _mib(n: int) -> str:
    """MiB, the unit budgets are set in; below one MiB the size itself (not "0.0 MiB")."""
    if n < MIB:
        return human_bytes(n)
    return f"{n / MIB:.0f} MiB" if n >= 10 * MIB else f"{n / MIB:.1f} MiB"


def choose_bucket_join(facts: BucketFacts, budget: int, budget_from: str = "") -> BucketJoin:
    """Which bucketed tables may be a hash join's build side: those whose largest bucket, estimated
    in memory (``facts.largest_bucket``, from the catalog's sizes), fits ``budget``. Returns the
    decision as data for the report: method (``hash`` when some table fits), budget, each table's
    largest bucket, the tables to hint and a one-line reason. With budget 0 no table is hinted
    (sort-merge only)."""
    largest, unknown = dict(facts.largest_bucket), list(facts.unsized)
    build = sorted((name for name, size in largest.items() if size <= budget), key=lambda n: largest[n]) if budget else []
    if not largest and not unknown:
        reason = "no table is read bucketed"
    elif not budget:
        reason = "hash join disabled (budget 0)"
    elif build:
        reason = f"largest build bucket {_mib(largest[build[0]])} of {_mib(budget)} budget"
    elif largest:
        smallest = min(largest, key=largest.get)
        reason = (f"smallest table's largest bucket ({smallest}) {_mib(largest[smallest])} exceeds the "
                  f"{_mib(budget)} budget")
    else:
        reason = f"the plan carries no bucket sizes for {', '.join(unknown)}"
    return BucketJoin(method=HASH if build else SORT_MERGE, budget=budget, budget_from=budget_from,
                      largest_bucket=largest, build_tables=build, reason=reason)


ORDERED_READ_WINS = ("each bucket's files are sorted by the key and read in order, so the sort-merge join sorts "
                     "nothing, and then it is faster than the hash join")


# Spark packs equality keys into one long, and then builds its fast long-keyed hash map, when every
# key is an integral type and their sizes add up to at most 8 bytes (HashJoin.rewriteKeyExpr).
_INTEGRAL_BYTES = {"tinyint": 1, "byte": 1, "smallint": 2, "short": 2, "int": 4, "integer": 4, "bigint": 8, "long": 8}


def packs_into_long(key_types: Sequence[str | None]) -> bool:
    """The join keys (their SQL types; None: unknown) fit one long for Spark's hash map."""
    sizes = [_INTEGRAL_BYTES.get((t or "").strip().lower()) for t in key_types]
    return bool(sizes) and None not in sizes and sum(sizes) <= 8  # type: ignore[operator]


def hash_pays_off(join_keys: Sequence[Sequence[str | None]], streams: bool) -> str | None:
    """Why a hash join that fits the budget would still be slower than the sort-merge join (None:
    it pays off), from the shape of the query.

    Measured on the seeds' tables (bench/bench_seeds_variants.py; docs/benchmarks.md, "The seeds' benchmark and
    the bucket-level hash join"):
    joined on ``(dt, id)``, a date and a bigint, Spark hashes with its generic map of binary rows,
    and the sort-merge join took 0.6x the hash join's task CPU for a query that reads every row
    (an aggregation, a write), on key-sorted bucket files and on unsorted ones alike. The hash join
    wins when the keys pack into one long (Spark's long-keyed map), and when the query stops early
    (``LIMIT`` without an ORDER BY or aggregation above the join): it streams the probe side while
    the sort-merge join first sorts every bucket whole."""
    if streams or all(packs_into_long(keys) for keys in join_keys):
        return None
    wide = next(keys for keys in join_keys if not packs_into_long(keys))
    shown = ", ".join(t or "unknown" for t in wide)
    return (f"the join keys ({shown}) do not pack into one long and the query reads every row, where Spark's "
            "sort-merge join is faster than its hash join")


def hash_or_not(spark, plan: JoinPlan, choice: BucketJoin) -> BucketJoin:
    """The build side fits: hash join, unless the sort-merge join is the faster one, read from the
    parsed query: when its keys are the order the buckets' files are read in (the ordered read:
    no sort at all), or when the query's shape makes it so (:func:`hash_pays_off`). A query
    Spark cannot parse keeps the choice (it fails to plan with its own message right after)."""
    columns = {t.name.lower(): {c.lower(): ty.lower() for c, ty in t.columns} for t in plan.tables if t.bucketed}
    try:
        streams, keys, names = query_shape(spark, plan.query, columns)
    except Exception:
        return choice
    facts = plan.bucket_facts
    if locality.ordered_read(spark) and facts.one_file_per_bucket and keys_in_read_order(names, facts.read_orders):
        # measured: bench_seeds_variants.py (smj against hash) and bench_join.py (ours_smj)
        return replace(choice, method=SORT_MERGE, build_tables=[], reason=f"{choice.reason} fits, but {ORDERED_READ_WINS}")
    why_not = hash_pays_off(keys, streams)
    if why_not:
        return replace(choice, method=SORT_MERGE, build_tables=[], reason=f"{choice.reason} fits, but {why_not}")
    return choice


def _phase(clock: DriverClock | None, name: str):
    return clock.phase(name) if clock is not None else nullcontext()


def plan_bucket_join(spark, plan: JoinPlan, clock: DriverClock | None) -> tuple[JoinPlan, BucketJoin | None]:
    """How the colocated joins join inside a bucket (hash or sort-merge, against the executors'
    memory), marked on the tables that build a hash join; None when no table is read bucketed.
    ``clock``: the time goes to the driver's planning phase."""
    if not any(t.bucketed for t in plan.tables):
        return plan, None
    with _phase(clock, "plan"):
        budget, budget_from = hash_budget(spark, plan)
        choice = choose_bucket_join(plan.bucket_facts, budget, budget_from)
        if choice.method == HASH:
            choice = hash_or_not(spark, plan, choice)
    log.info(f"bucket join: {choice.method} ({choice.reason}; budget from {budget_from})")
    return replace(plan, tables=[replace(t, hash_build=t.name in choice.build_tables) for t in plan.tables]), choice


__all__ = ["DEFAULT_SAFETY", "HASH", "HASH_BUDGET_CONF", "ORDERED_READ_WINS", "RESERVED_MEMORY", "SORT_MERGE",
           "choose_bucket_join", "default_hash_budget", "hash_budget", "hash_or_not", "hash_pays_off",
           "packs_into_long", "plan_bucket_join"]
