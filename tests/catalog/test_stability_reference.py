"""The summary-based stability check, placement snapshot and loads give the same answers as the
original computation over every replica row, through random sequences of writes, overwrites, bad
replicas, backends going down and up, forced maps and partial clones (SQLite and PostgreSQL).

``reference_*`` below are the pre-summary algorithms, kept verbatim in spirit: they load every
replica of a group into Python."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import timedelta

import pytest
from colocate_testing import add_local_backends
from sqlalchemy import select, update
from test_incremental import COLUMNS, Clock, write

from airflow_colocate.catalog import Catalog, summary
from airflow_colocate.catalog import models as m
from airflow_colocate.model.views import MAX_REASONS, Reason
from airflow_colocate.core.contract import CloneResult, VerifyResult
from airflow_colocate.core.times import utc

DAYS = [f"2026-10-{d:02d}" for d in range(1, 9)]


def scan(s, g):
    tables = {t.id: t for t in s.scalars(select(m.Table).where(m.Table.group_id == g.id, m.Table.state == "normal")
                                         .order_by(m.Table.id))}
    db_names = {d.id: d.name for d in s.scalars(select(m.Database))}
    labels = {t.id: f"{db_names[t.db_id]}.{t.name}" for t in tables.values()}
    parts = []
    if tables:
        parts = [(tables[p.table_id], p) for p in s.scalars(
            select(m.Partition).where(m.Partition.table_id.in_(list(tables)), m.Partition.visible_version > 0)
            .order_by(m.Partition.table_id, m.Partition.value))]
    visible = {p.id: p.visible_version for _, p in parts}
    by_bucket: dict = {}
    if visible:
        for r in s.scalars(select(m.Replica).where(m.Replica.partition_id.in_(list(visible)))):
            if r.version == visible[r.partition_id]:
                by_bucket.setdefault((r.partition_id, r.bucket_seq), {})[r.backend_id] = r
    return tables, labels, parts, by_bucket


def bucket_map(s, g):
    return [list(r.backend_ids) for r in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)
                                                  .order_by(m.BucketMap.bucket_seq))]



def reference_where(b, seqs, bmap, backends):
    """Issue 16 (7): buckets with another alive backend in their map row keep a replica there."""
    def show(x):
        return ", ".join(map(str, x[:8])) + (", ..." if len(x) > 8 else "")

    alive_elsewhere = [q for q in seqs if any(o != b.id and o in backends and backends[o].state == "alive" for o in bmap[q])]
    none_alive = [q for q in seqs if q not in alive_elsewhere]
    text = []
    if alive_elsewhere:
        text.append(f"bucket seqs {show(alive_elsewhere)} have a replica on {b.name}, which is {b.state}")
    if none_alive:
        text.append(f"bucket seqs {show(none_alive)} are not on an alive backend")
    return "; ".join(text)

def reference_problems(s, g):
    reasons, count = [], 0

    def add(reason):
        nonlocal count
        count += 1
        if len(reasons) < MAX_REASONS:
            reasons.append(reason)

    job = s.scalars(select(m.Job).where(m.Job.group_id == g.id, m.Job.kind.in_(("relocate", "balance", "repair")),
                                        m.Job.state == "running").order_by(m.Job.id)).first()
    if job is not None:
        add(Reason(f"balance job {job.id} ({job.kind}, step {job.progress.get('step', 'planned')}) is changing the group"))
    bmap = bucket_map(s, g)
    backends = {b.id: b for b in s.scalars(select(m.Backend))}
    seqs_of = defaultdict(list)
    for seq, row in enumerate(bmap):
        for be in row:
            seqs_of[be].append(seq)
    for be in sorted(seqs_of):
        b = backends.get(be)
        if b is None:
            add(Reason(f"bucket map names backend id {be}, which does not exist: relocate the group"))
        elif b.state != "alive":
            since = utc(b.state_since).strftime("%Y-%m-%d %H:%M UTC")
            add(Reason(f"backend {b.name} is {b.state} since {since} ({b.state_reason or 'no reason given'}): "
                       + reference_where(b, seqs_of[be], bmap, backends), backend=b.name))
    _, labels, parts, by_bucket = scan(s, g)
    for t, p in parts:
        for seq in range(min(p.bucket_num, len(bmap))):
            have = by_bucket.get((p.id, seq), {})
            for be in bmap[seq]:
                b = backends.get(be)
                if b is None or b.state != "alive":
                    continue
                r = have.get(be)
                if r is not None and r.state == "verified":
                    continue
                problem = ("no verified replica" if r is None else
                           "replica failed its checksum (bad)" if r.state == "bad" else f"replica is {r.state}")
                add(Reason(problem, table=labels[t.id], partition=p.value, version=p.visible_version, bucket=seq,
                           backend=b.name))
    return reasons, count


def reference_snapshot(s):
    alive = {b.id for b in s.scalars(select(m.Backend).where(m.Backend.state == "alive"))}
    out, in_group = {}, set()
    for g in s.scalars(select(m.ColocateGroup).order_by(m.ColocateGroup.id)):
        bmap = bucket_map(s, g)
        tables, _, parts, by_bucket = scan(s, g)
        in_group.update(tables)
        sizes = [0] * g.bucket_num
        repairs = redundant = 0
        for _, p in parts:
            for seq in range(min(p.bucket_num, len(bmap))):
                have = by_bucket.get((p.id, seq), {})
                good = [r.bytes for r in have.values() if r.state == "verified"]
                sizes[seq] += max(good) if good else 0
                row = bmap[seq]
                repairs += sum(1 for be in row if be in alive and (be not in have or have[be].state != "verified"))
                if all(be in have and have[be].state == "verified" for be in row):
                    redundant += sum(1 for be, r in have.items() if be not in row and r.state in ("verified", "bad"))
        out[g.id] = (tuple(sizes), repairs, redundant)
    other = defaultdict(int)
    loads = defaultdict(lambda: [0, 0])
    q = (select(m.Replica.backend_id, m.Replica.bytes, m.Replica.table_id, m.Replica.version, m.Partition.visible_version)
         .join(m.Partition, m.Partition.id == m.Replica.partition_id).where(m.Replica.state == "verified"))
    for be, size, table_id, version, visible in s.execute(q):
        if version == visible:
            loads[be][0] += 1
            loads[be][1] += size
            if table_id not in in_group:
                other[be] += size
    return out, dict(other), {be: tuple(v) for be, v in loads.items()}


def compare(cat: Catalog, step: str) -> dict[str, int]:
    """Every answer equals the reference; returns what the state had, so the test can prove that
    its random walk went through interesting states."""
    assert cat.tx(summary.drift) == [], step
    want_groups, want_other, want_loads = cat.tx(reference_snapshot)
    for g in cat.groups.list():
        want = cat.tx(lambda s: reference_problems(s, s.get(m.ColocateGroup, g.grp_id)))
        got = cat.health.check_group(g.group_id)
        assert (list(got.reasons), got.problems) == want, step
        again = cat.health.check_group(g.group_id)
        assert again.reused and (list(again.reasons), again.problems) == want, step
    snap = cat.balance.snapshot()
    assert {g.grp_id: (g.bucket_bytes, g.repairs, g.redundant) for g in snap.groups} == want_groups, step
    assert snap.other_bytes == want_other, step
    loads = {be: (v["replicas"], v["bytes"]) for be, v in cat.backends.loads().items() if v["replicas"]}
    assert loads == want_loads, step
    return {"problems": max(cat.health.check_group(g.group_id).problems for g in cat.groups.list()),
            "repairs": max(g.repairs for g in snap.groups), "redundant": max(g.redundant for g in snap.groups),
            "other": len(snap.other_bytes)}


def moves_job(cat: Catalog, rng: random.Random, group: str) -> int | None:
    g = cat.groups.get(group)
    alive = [b.id for b in cat.backends.list() if b.state == "alive"]
    old = [list(r) for r in g.bucket_map]
    new = [list(r) for r in old]
    moves = []
    for seq in rng.sample(range(len(old)), k=2):
        spare = [be for be in alive if be not in new[seq]]
        if not spare:
            continue
        i = rng.randrange(len(new[seq]))
        dst = rng.choice(spare)
        moves.append({"bucket_seq": seq, "index": i, "src": new[seq][i], "dst": dst, "bytes": 0, "why": "balance"})
        new[seq][i] = dst
    if not moves:
        return None
    try:
        job = cat.balance.create(g.grp_id, "balance", {"old_map": old, "new_map": new, "moves": moves})
    except Exception:  # a job is already running
        return None
    cat.balance.begin(job.id)
    return job.id


@pytest.mark.parametrize("seed", [1, 2])
def test_summary_answers_equal_the_replica_scan(catalog_url, tmp_path, seed):
    rng = random.Random(seed)
    clock = Clock()
    cat = Catalog(catalog_url, actor="pytest", clock=clock)
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=6)
    for name, group in (("a", "g1"), ("b", "g1"), ("c", "g2")):
        cat.tables.create(name, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"], colocate_with=group)
    cat.tables.create("loose", COLUMNS, ["id"], bucket_num=3, replication_num=2, partition_cols=["dt"])
    for flag in ("disable_colocate_balance", "disable_colocate_relocate"):
        cat.set_flag(flag, True)
    for t in ("a", "b", "c", "loose"):
        for day in DAYS:
            write(cat, t, day)
    seen = compare(cat, "written")
    jobs: list[int] = []
    for step in range(24):
        action = rng.choice(["overwrite", "bad", "down", "up", "force", "job", "clone", "clone", "switch", "finish"])
        label = f"seed {seed} step {step}: {action}"
        backends = cat.backends.list()
        if action == "overwrite":
            try:
                write(cat, rng.choice(["a", "b", "c", "loose"]), rng.choice(DAYS), salt=label)
            except Exception:  # not enough alive backends for the write quorum
                continue
        elif action == "bad":
            needs = cat.health.replicas_to_verify()
            picked = rng.sample(needs, k=min(3, len(needs)))
            cat.health.record_verify([VerifyResult(r.replica_id, ok=False, error="mismatch") for r in picked])
        elif action == "down":
            alive = [b for b in backends if b.state == "alive"]
            if len(alive) > 3:
                cat.backends.set_state(rng.choice(alive).name, "down", reason=label)
        elif action == "up":
            down = [b for b in backends if b.state == "down"]
            if down:
                cat.backends.set_state(rng.choice(down).name, "alive")
        elif action == "force":
            group = rng.choice(["g1", "g2"])
            alive = [b.id for b in backends if b.state == "alive"]
            g = cat.groups.get(group)
            if len(alive) >= 2 and not cat.balance.active():
                new = [sorted(rng.sample(alive, 2)) if rng.random() < 0.6 or set(r) - set(alive) else list(r)
                       for r in g.bucket_map]
                cat.groups.set_bucket_map(group, new, force=True)
        elif action == "job":
            job = moves_job(cat, rng, rng.choice(["g1", "g2"]))
            if job is not None:
                jobs.append(job)
        elif action == "clone":
            for job in [j for j in jobs if cat.jobs.get(j).state == "running"]:
                needs, _ = cat.balance.clone_needs(job)
                picked = rng.sample(needs, k=rng.choice([len(needs), len(needs) // 2]))
                cat.balance.register_clones(job, [CloneResult(f"{job}:{i}", n.partition_id, n.version, n.bucket_seq, n.backend_id,
                                                      n.sources[0][0], n.path, True, n.rows, n.bytes, n.checksum)
                                          for i, n in enumerate(picked)])
                cat.balance.move_progress(job)
        elif action == "switch":
            for job in [j for j in jobs if cat.jobs.get(j).state == "running"]:
                cat.balance.switch_map(job)
        elif action == "finish":
            for job in [j for j in jobs if cat.jobs.get(j).state == "running"]:
                if cat.balance.switch_map(job).switched and cat.balance.finish(job, grace=timedelta(0)).done:
                    cat.balance.close(job, grace=timedelta(0))
                    clock.t += timedelta(minutes=1)
                    items = cat.balance.take_droppable()
                    cat.balance.forget_replicas([i.replica_id for i in items[: len(items) // 2]])
        seen = {k: max(v, seen[k]) for k, v in compare(cat, label).items()}
    # Then every job runs to its end: clone all, switch (old copies are redundant), finish, drop.
    for b in cat.backends.list():
        if b.state == "down":
            cat.backends.set_state(b.name, "alive")
    jobs += [j for j in (moves_job(cat, rng, "g1"), moves_job(cat, rng, "g2")) if j is not None]
    for job in [j for j in jobs if cat.jobs.get(j).state == "running"]:
        for _ in range(2):  # before the switch, and what the switch adds
            needs, _ = cat.balance.clone_needs(job)
            cat.balance.register_clones(job, [CloneResult(f"{job}:{i}", n.partition_id, n.version, n.bucket_seq, n.backend_id,
                                                  n.sources[0][0], n.path, True, n.rows, n.bytes, n.checksum)
                                      for i, n in enumerate(needs)])
            cat.balance.switch_map(job)
        seen = {k: max(v, seen[k]) for k, v in compare(cat, f"seed {seed}: job {job} switched").items()}
        cat.balance.finish(job, grace=timedelta(0))
        cat.balance.close(job, grace=timedelta(0))
        compare(cat, f"seed {seed}: job {job} finished")
        clock.t += timedelta(minutes=1)
        cat.balance.forget_replicas([i.replica_id for i in cat.balance.take_droppable()])
        compare(cat, f"seed {seed}: job {job} dropped")
    assert all(seen.values()), seen  # problems, repairs, redundant replicas and loose tables were all met
    cat.dispose()


def test_many_problems_are_capped_in_check_order(catalog_url, tmp_path):
    clock = Clock()
    cat = Catalog(catalog_url, actor="pytest", clock=clock)
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=4)
    for name in ("a", "b"):
        cat.tables.create(name, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"], colocate_with="g")
    for t in ("a", "b"):
        for day in DAYS:
            write(cat, t, day)
    for flag in ("disable_colocate_balance", "disable_colocate_relocate"):
        cat.set_flag(flag, True)
    old = cat.groups.get("g").bucket_map
    new = [[be for be in (1, 2, 3, 4) if be not in row] for row in old]  # every replica elsewhere
    cat.groups.set_bucket_map("g", new)
    health = cat.health.check_group("g")
    want = cat.tx(lambda s: reference_problems(s, s.get(m.ColocateGroup, cat.groups.get("g").grp_id)))
    assert health.problems == 2 * len(DAYS) * 4 * 2 > MAX_REASONS
    assert (list(health.reasons), health.problems) == want
    assert [r.partition for r in health.reasons[:8]] == [DAYS[0]] * 8  # partition by partition, all buckets of each
    cat.dispose()


def test_old_copies_count_and_drop_only_where_the_bucket_is_whole(catalog_url, tmp_path):
    """Bucket 0 moves from be_y to be_z; then be_x's copy of one day goes bad and be_x goes down:
    only the two days whole on the new map count as redundant, and only they are dropped."""
    clock = Clock()
    cat = Catalog(catalog_url, actor="pytest", clock=clock)
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=4)
    cat.tables.create("a", COLUMNS, ["id"], bucket_num=2, replication_num=2, partition_cols=["dt"], colocate_with="g")
    for day in DAYS[:3]:
        write(cat, "a", day)
    g = cat.groups.get("g")
    old = [list(r) for r in g.bucket_map]
    x, y = old[0]
    z = next(be for be in (1, 2, 3, 4) if be not in old[0])
    new = [[x, z], old[1]]
    job = cat.balance.create(g.grp_id, "balance", {"old_map": old, "new_map": new, "moves": [
        {"bucket_seq": 0, "index": 1, "src": y, "dst": z, "bytes": 0, "why": "balance"}]}).id
    cat.balance.begin(job)
    needs, _ = cat.balance.clone_needs(job)
    assert len(needs) == 3
    cat.balance.register_clones(job, [CloneResult(str(i), n.partition_id, n.version, 0, z, y, n.path, True, n.rows, n.bytes,
                                          n.checksum) for i, n in enumerate(needs)])
    assert cat.balance.switch_map(job).switched
    assert cat.balance.snapshot().groups[0].redundant == 3
    _, parts = cat.reads.replicas("a", [DAYS[1]])
    on_x = next(r for r in parts[0].buckets[0] if r.backend_id == x)
    rid = next(r.replica_id for r in cat.health.replicas_to_verify() if r.path == on_x.path)
    cat.health.record_verify([VerifyResult(rid, ok=False, error="mismatch")])
    cat.backends.set_state(next(b.name for b in cat.backends.list() if b.id == x), "down")
    compare(cat, "bad copy on a down backend")
    assert cat.balance.snapshot().groups[0].redundant == 2  # via the per-partition query
    done = cat.balance.finish(job, grace=timedelta(0))
    assert done.done and cat.balance.close(job, grace=timedelta(0)) == 2
    compare(cat, "finished")
    clock.t += timedelta(minutes=1)
    kept = cat.reads.replicas("a", [DAYS[1]])[1][0].buckets[0]
    assert {r.backend_id for r in kept} == {y, z}  # be_y's copy of the day not whole on the map stays verified
    cat.dispose()


def test_drop_marks_recount_a_column_whose_size_the_summaries_cannot_tell(catalog_url, tmp_path):
    """finish marks a whole column's old copies in one statement and takes what leaves the
    summaries from the summaries themselves. Where they cannot tell it (the copy dropped was its
    bucket's largest, so the bucket's size changes), the column is recounted instead: the
    summaries still equal a recount afterwards."""
    clock = Clock()
    cat = Catalog(catalog_url, actor="pytest", clock=clock)
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=4)
    cat.tables.create("a", COLUMNS, ["id"], bucket_num=2, replication_num=2, partition_cols=["dt"], colocate_with="g")
    for day in DAYS[:3]:
        write(cat, "a", day)
    g = cat.groups.get("g")
    old = [list(r) for r in g.bucket_map]
    x, y = old[0]
    z = next(be for be in (1, 2, 3, 4) if be not in old[0])
    job = cat.balance.create(g.grp_id, "balance", {"old_map": old, "new_map": [[x, z], old[1]], "moves": [
        {"bucket_seq": 0, "index": 1, "src": y, "dst": z, "bytes": 0, "why": "balance"}]}).id
    cat.balance.begin(job)
    needs, _ = cat.balance.clone_needs(job)
    cat.balance.register_clones(job, [CloneResult(str(i), n.partition_id, n.version, 0, z, y, n.path, True, n.rows, n.bytes,
                                          n.checksum) for i, n in enumerate(needs)])
    assert cat.balance.switch_map(job).switched

    pid = needs[1].partition_id

    def grow(s):  # be_y's copy of one day becomes its bucket's largest, through tracking: still exact
        with summary.tracking(s, buckets={(pid, 0)}):
            s.execute(update(m.Replica).where(m.Replica.backend_id == y, m.Replica.partition_id == pid,
                                              m.Replica.bucket_seq == 0).values(bytes=m.Replica.bytes + 7))

    cat.tx(grow)
    assert cat.tx(summary.drift) == []
    done = cat.balance.finish(job, grace=timedelta(0))
    assert done.done and cat.balance.close(job, grace=timedelta(0)) == 3
    compare(cat, "the dropped copy was its bucket's largest")
    cat.dispose()
