"""Join prediction: the seeds' rule for whether one join of a query runs colocated.

A join is colocated when its tables are in one group, the group is stable, colocate join is not
disabled (globally or for this run), and the equality keys cover the distribution columns position
by position. The Spark join job calls :func:`predict_join` on every join of the physical plan, so
this module imports nothing but the standard library and the plan contract: the Spark driver must
not load the catalog. The job also asks :func:`choose_bucket_join` whether a bucket's join may be a
hash join, from the catalog's bucket sizes that travel with the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_colocate.core.contract import BucketJoin, ReadTable
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.sizes import human_bytes
from airflow_colocate.model.reasons import Fallback

if TYPE_CHECKING:
    from airflow_colocate.model.views import TableView


def keys_cover(left_dist: Sequence[str], right_dist: Sequence[str], pairs: Sequence[tuple[str, str]]) -> bool:
    """Equality keys cover the distribution columns position by position: for every i, the pair
    (left_dist[i], right_dist[i]) is among the join's equality pairs. More pairs (``dt``) are fine."""
    have = {(a.lower(), b.lower()) for a, b in pairs}
    return len(left_dist) == len(right_dist) and all(
        (lc.lower(), rc.lower()) in have for lc, rc in zip(left_dist, right_dist))


Column = tuple[str, str]  # (table alias, column)


def predict_join(left: Sequence[str], right: Sequence[str], carriers: tuple[Sequence[str], Sequence[str]],
                 keys: Sequence[tuple[Column | None, Column | None]], *, reasons: Mapping[str, str],
                 groups: Mapping[str, str], dist_cols: Mapping[str, Sequence[str]]) -> tuple[bool, str | None]:
    """Whether one join of the query can run without a shuffle, and if not, why, from what the plan
    registered (``reasons``, ``groups``, ``dist_cols`` per table alias), the tables under each side,
    the tables whose bucketing still partitions each side (``carriers``), and the join's equality
    keys resolved to table columns. The join job compares this prediction with Spark's plan."""
    for table in [*left, *right]:
        if reasons.get(table):
            return False, reasons[table]
    if not left or not right or len({groups.get(t, "") for t in [*left, *right]}) != 1:
        return False, Fallback.NOT_SAME_GROUP.because()
    if not carriers[0] or not carriers[1]:
        return False, Fallback.NOT_COVERED.because(
            "an input is not partitioned by a bucket key any more (it comes out of a full outer join)")
    for lt in carriers[0]:
        for rt in carriers[1]:
            pairs = [(lk[1], rk[1]) for lk, rk in keys if lk and rk and lk[0] == lt and rk[0] == rt]
            if keys_cover(dist_cols[lt], dist_cols[rt], pairs):
                return True, None
    return False, Fallback.NOT_COVERED.because()


JOIN_SQL = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN",
            "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN"}


def structured_sql(views: Sequence[TableView], on: Sequence[Sequence[Sequence[str]]], how: str,
                   columns: Sequence[str]) -> str:
    """SQL for ``views[0] JOIN views[1] ON on[0] JOIN views[2] ON on[1] …``; tables partitioned
    alike also join on the partition column, the seeds' ``(dt, id)`` shape."""
    if how not in JOIN_SQL:
        raise InvalidArgument(f"invalid join type {how!r}: expected one of {', '.join(JOIN_SQL)}")
    if len(views) < 2 or len(on) != len(views) - 1:
        raise InvalidArgument(f"a structured join of {len(views)} tables needs {max(len(views) - 1, 1)} key lists in 'on', got {len(on)}")
    known = {c.lower() for v in views for c, _ in v.columns}
    for col in columns:
        if col.lower() not in known:
            raise InvalidArgument(f"column {col!r} is in none of the joined tables ({', '.join(v.name for v in views)})")
    sql = f"SELECT {', '.join(columns) or '*'} FROM {views[0].name}"
    for i, (view, pairs) in enumerate(zip(views[1:], on), 1):
        conds = []
        if view.partition_cols and views[0].partition_cols:
            conds.append(f"{views[0].name}.{views[0].partition_cols[0]} = {view.name}.{view.partition_cols[0]}")
        for pair in pairs:
            if len(pair) != 2:
                raise InvalidArgument(f"join key {pair!r} must be a [left column, right column] pair")
            conds.append(f"{pair[0]} = {view.name}.{pair[1]}")
        if not pairs:
            raise InvalidArgument(f"join {i} ({view.name}) has no equality keys")
        sql += f" {JOIN_SQL[how]} {view.name} ON " + " AND ".join(conds)
    return sql


# ---------------------------------------------------------------------- bucket-level hash join
#
# Doris joins bucket by bucket with a hash join; Spark's colocated join sorts both sides of every
# bucket first. A shuffled hash join of two bucketed scans keeps the zero-Exchange plan and drops
# the sorts, but it holds the whole build side of one bucket in an executor task's memory, with no
# spill. The catalog knows every bucket's bytes and rows, so the join job hints SHUFFLE_HASH only on
# the tables whose every bucket (summed over the partitions read) fits the budget; Spark builds one
# of the hinted sides it may build for the join type (inner: the smaller; left outer, semi, anti:
# the right; right outer: the left; full outer: either), and sort-merges a join with no such side.

MIB = 1 << 20
RESERVED_MEMORY = 300 * MIB  # Spark's reserved system memory, outside spark.memory.fraction
DEFAULT_SAFETY = 0.5  # of the unified (execution + storage) memory one task may use for one bucket
EXPANSION = 3  # decoded rows in a hash map take about this many times their parquet bytes, plus
ROW_OVERHEAD = 16  # bytes a row for the map's pointers
HASH = "hash"
SORT_MERGE = "sort-merge"


def parse_size(value: str | int, what: str) -> int:
    """``536870912``, ``512m``, ``1g``, ``512MiB`` -> bytes (Spark's size strings, binary units)."""
    text = str(value).strip().lower().removesuffix("ib").removesuffix("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    try:
        if text and text[-1] in units:
            size = int(float(text[:-1]) * units[text[-1]])
        else:
            size = int(text)
    except ValueError:
        raise InvalidArgument(f"{what} {value!r} is not a size: expected bytes or a number with k, m, g or t "
                              "(e.g. 512m)") from None
    if size < 0:
        raise InvalidArgument(f"{what} {value!r} is negative: expected 0 (no hash join) or a positive size")
    return size


def default_hash_budget(memory: str, cores: int, fraction: float = 0.6, safety: float = DEFAULT_SAFETY) -> int:
    """The memory one task may give the build side of one bucket:
    ``(executor memory - 300 MiB reserved) x spark.memory.fraction x safety / executor cores``
    (``memory``: spark.executor.memory, or spark.driver.memory in local mode; ``cores``: tasks run
    at once in one executor). Execution memory is shared by the tasks running at once; the safety
    factor leaves room for the streamed side's buffers, the other operators and the estimate's error."""
    usable = max(parse_size(memory, "executor memory") - RESERVED_MEMORY, 0)
    return int(usable * fraction * safety / max(cores, 1))


def build_estimate(bytes_: int, rows: int) -> int:
    """Estimated memory of one bucket's rows in a hash map, from its parquet bytes and rows."""
    return EXPANSION * bytes_ + ROW_OVERHEAD * rows


def bucket_sizes(table: ReadTable) -> list[tuple[int, int]] | None:
    """(bytes, rows) per bucket seq of a ReadTable, summed over the partitions it reads (a bucketed
    scan reads bucket b of every partition in one task), from the catalog's sizes of the chosen
    replica (the first candidate); None when the plan carries no sizes."""
    sizes = [(0, 0)] * table.bucket_num
    for part in table.partitions:
        if not part.candidates:
            if any(part.bucket_paths):
                return None
            continue
        for seq, candidates in enumerate(part.candidates):
            if part.bucket_paths[seq] and candidates:
                b, r = sizes[seq]
                sizes[seq] = (b + candidates[0].bytes, r + candidates[0].rows)
    return sizes


def _mib(n: int) -> str:
    """MiB, the unit budgets are set in; below one MiB the size itself (not "0.0 MiB")."""
    if n < MIB:
        return human_bytes(n)
    return f"{n / MIB:.0f} MiB" if n >= 10 * MIB else f"{n / MIB:.1f} MiB"


def choose_bucket_join(tables: Sequence[ReadTable], budget: int, budget_from: str = "") -> BucketJoin:
    """Which bucketed tables may be a hash join's build side: those whose largest bucket, estimated
    in memory (:func:`build_estimate`), fits ``budget``. Returns the decision as data for the
    report: method (``hash`` when some table fits), budget, each table's largest bucket, the
    tables to hint and a one-line reason. With budget 0 no table is hinted (sort-merge only)."""
    largest: dict[str, int] = {}
    unknown = []
    for t in tables:
        if not t.bucketed:
            continue
        sizes = bucket_sizes(t)
        if sizes is None:
            unknown.append(t.name)
            continue
        largest[t.name] = max((build_estimate(b, r) for b, r in sizes), default=0)
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


def one_file_per_bucket(tables: Sequence[ReadTable]) -> bool:
    """Every bucket of every bucketed table holds one file per partition in the replica chosen to
    read (the catalog's file lists): what lets a bucket's files be read in key order, partition by
    partition, with no sort (``java/.../colocate/ordered/SkipSortedSort.java``). A replica whose
    files the catalog did not record counts as not known, so not one."""
    for t in tables:
        if not t.bucketed:
            continue
        for part in t.partitions:
            for seq, path in enumerate(part.bucket_paths):
                if not path:
                    continue
                if seq >= len(part.candidates) or not part.candidates[seq]:
                    return False
                files = part.candidates[seq][0].files
                if files is None or len(files) > 1:
                    return False
    return True


def keys_in_read_order(key_names: Sequence[tuple[Sequence[str | None], Sequence[str | None]]],
                       tables: Sequence[ReadTable]) -> bool:
    """Whether every join's keys, on each side in the order written, are an order the colocated
    buckets are read in: a prefix of (partition column, bucket key...) of a bucketed table, or of
    the bucket key alone when the table reads one partition. Then Spark's merge join finds its
    inputs in order (the ordered read) and sorts nothing; ``ON a.id = b.id AND a.dt = b.dt`` asks
    for (id, dt) and is sorted. A prediction for the choice: the rule in the jar decides at run
    time, and the explain reports what it did."""
    orders = []
    for t in tables:
        if not t.bucketed:
            continue
        dist = [c.lower() for c in t.dist_cols]
        orders.append([c.lower() for c in t.partition_cols] + dist)
        if len(t.partitions) <= 1:
            orders.append(dist)
    if not key_names:
        return False
    for sides in key_names:
        for names in sides:
            if not names or not any(list(names) == order[:len(names)] for order in orders):
                return False
    return True


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
