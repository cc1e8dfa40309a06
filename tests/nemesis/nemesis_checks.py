"""The invariants, each a function that returns its violations as one line each.

Reads are judged against the model (nemesis_model), never against another product read. The lake
itself is read independently of the product's read path, as the suite's oracle tests do: the
catalog's rows name the replica folders, pyarrow reads their files, and only a replica whose files
hash to its recorded checksum is believed (a file the nemesis hurt is the product's to detect, not
the oracle's)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
from colocate_testing import spark_bucket
from nemesis_model import Model, rows
from nemesis_schedule import BACKENDS, TABLES
from sqlalchemy import select

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.summary import drift
from airflow_colocate.storage import fs, replica_dir


def _seed_of(table: str, dt: str, got: list[tuple]) -> tuple[object, str | None]:
    """The one write whose rows ``got`` are exactly, or a violation's line."""
    if not got:
        return None, None
    dup = [r for r, n in Counter(got).items() if n > 1]
    if dup:
        return None, f"{table}/{dt}: rows returned twice, e.g. {dup[0]}"
    seeds = {r[1].split(":")[2] for r in got}
    if len(seeds) != 1 or any(not r[1].startswith(f"{table}:{dt}:") for r in got):
        return None, f"{table}/{dt}: rows of more than one write or of another partition: {sorted(seeds)[:4]}"
    seed = int(seeds.pop())
    want = rows(table, dt, seed)
    if set(got) != want:
        return None, f"{table}/{dt}: write {seed} shows {len(got)} rows, {len(want - set(got))} missing, {len(set(got) - want)} foreign"
    return seed, None


def check_read(table: str, got: list[tuple], allowed: dict) -> list[str]:
    """A registered read of ``table``: per day, exactly one allowed write's rows, none twice."""
    by_dt: dict[str, list] = defaultdict(list)
    for r in got:
        by_dt[r[2]].append((r[0], r[1], r[2]))
    out = []
    for (t, dt), seeds in allowed.items():
        if t != table:
            continue
        seed, problem = _seed_of(table, dt, by_dt.pop(dt, []))
        if problem:
            out.append(f"read: {problem}")
        elif seed not in seeds:
            out.append(f"read: {table}/{dt} returned write {seed}, the model allows {sorted(seeds, key=str)}")
    out += [f"read: {table} returned rows of day {dt} the model never wrote" for dt in by_dt]
    return out


def check_join(got: list[tuple], allowed: dict) -> list[str]:
    """The join of a and b per day: equal to the join of some allowed pair of writes."""
    by_dt: dict[str, list] = defaultdict(list)
    for r in got:
        by_dt[r[0]].append(tuple(r))
    out = []
    for dt in sorted({d for _, d in allowed}):
        have = by_dt.pop(dt, [])
        if len(set(have)) != len(have):
            out.append(f"join: day {dt} returned a row twice")
            continue
        options = []
        for sa in allowed[("a", dt)]:
            for sb in allowed[("b", dt)]:
                ra = {i: v for i, v, _ in rows("a", dt, sa)} if sa is not None else {}
                rb = {i: v for i, v, _ in rows("b", dt, sb)} if sb is not None else {}
                options.append({(dt, i, ra[i], rb[i]) for i in ra.keys() & rb.keys()})
        if set(have) not in options:
            out.append(f"join: day {dt} returned {len(have)} rows, no allowed pair of writes joins to them")
    out += [f"join: rows of day {dt} the model never wrote" for dt in by_dt]
    return out


def read_replica(r) -> list[tuple]:
    got = []
    for name, _ in replica_dir.replica_files(r.path):
        t = pq.read_table(fs.local_path(fs.join(r.path, name)), columns=["id", "v"])
        got += [(row["id"], row["v"]) for row in t.to_pylist()]
    return got


def check_lake(world, model: Model, *, final: bool = False) -> list[str]:
    """Every committed partition, read from the files the catalog names: exactly one write's rows,
    each in its bucket, as the model allows; a day the model holds for dropped shows nothing.
    Collapses the model to what it saw."""
    out = []
    for t in TABLES:
        _, parts = world.catalog.reads.replicas(t)
        seen = {}
        for p in parts:
            got: list[tuple] = []
            blind = False
            for seq, bucket in enumerate(p.buckets):
                good = [r for r in bucket if world.intact(r)]
                if not good:
                    blind = True
                    if final:
                        out.append(f"lake: {t}/{p.value} bucket {seq} has no intact verified replica "
                                   f"({len(bucket)} verified in the catalog)")
                    continue
                for i, v in read_replica(good[0]):
                    if spark_bucket(i, len(p.buckets)) != seq:
                        out.append(f"lake: {t}/{p.value} row {i} sits in bucket {seq}, its bucket is "
                                   f"{spark_bucket(i, len(p.buckets))}")
                    got.append((i, v, p.value))
            if (t, p.value) not in model.live:
                out.append(f"lake: {t}/{p.value} is a partition the model never wrote")
                continue
            if blind:
                seen[p.value] = "blind"
                continue
            seed, problem = _seed_of(t, p.value, got)
            if problem:
                out.append(f"lake: {problem}")
            seen[p.value] = seed
        for (table, dt) in model.live:
            if table != t or seen.get(dt) == "blind":
                continue
            problem = model.observe((t, dt), seen.get(dt))
            if problem:
                out.append(f"lake: {problem}")
    return out


def check_drift(world) -> list[str]:
    """The catalog's own consistency check: its per-bucket summaries equal a recount."""
    return [f"catalog: {d}" for d in world.catalog.tx(drift)]


def check_files(world) -> list[str]:
    """After a gc with no grace: no data file that no replica row names, no named file missing."""
    def named(s):
        return [(r.path, r.state, r.files or []) for r in s.scalars(select(m.Replica))]

    out, names = [], set()
    for path, state, files in world.catalog.tx(named):
        for f in files:
            name = f[0] if isinstance(f, (list, tuple)) else f
            full = Path(fs.local_path(fs.join(path, name)))
            names.add(str(full))
            if state == "verified" and not full.exists():
                out.append(f"files: {full} is named by a verified replica and missing")
    for root in (world.backend_root(b) for b in BACKENDS):
        for f in root.rglob("*"):
            if f.is_file() and f.parent != root and "_colocate" not in f.parts and str(f) not in names:
                out.append(f"files: {f} is named by no replica after gc")
    return out
