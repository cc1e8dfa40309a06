"""A repair's clones are registered without loading their buckets' rows (``clones.register_new``)
when every clone is a new row; the general path loads every replica of the buckets and decides row
by row. Both must leave the catalog exactly alike: the same replica rows, the same summaries (equal
to a recount), the same stability. Two lakes built alike are repaired, one each way, with the
cases the quick path must get right: two clones of one bucket in one batch (two lost backends),
a clone whose only source is marked bad (the bucket had no verified replica: its size grows), and
clones of a partition dropped while they ran (registered, but no longer visible: counted nowhere)."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from balance_lake import Clock, Lake, assert_whole

from airflow_colocate.catalog import Catalog, clones, summary
from airflow_colocate.catalog import models as m
from airflow_colocate.core.contract import BadReplica
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.storage import fs


def _build(root, url):
    clock = Clock()
    cat = Catalog(url, actor="pytest", clock=clock)
    cat.init()
    lake = Lake(cat, clock, root)
    for i in range(1, 6):
        lake.add_backend(f"be{i}")
    for table in ("a", "b"):
        lake.create(table, buckets=4, replicas=3)
        for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
            lake.write(table, day, range(400))
    # one bucket's survivors all marked bad (a read found a stray file): its clones copy from a bad source
    _, parts = cat.reads.replicas("a", ["2026-11-02"])
    bucket = parts[0].buckets[1]
    cat.health.mark_replicas_bad([BadReplica(r.id, "default.a", "2026-11-02", 1, r.backend_id, r.path,
                                             "read check: a stray file") for r in bucket
                                  if r.backend_id in (lake.names["be1"], lake.names["be2"], lake.names["be3"])])
    for name in ("be4", "be5"):  # two lost disks: buckets with two clones each
        shutil.rmtree(root / "backends" / name)
    probe_backends(cat, timeout=10, sample=0)
    clock.advance(minutes=31)
    return lake


def _state(lake: Lake) -> dict:
    def run(s):
        names = {b.id: b.name for b in s.query(m.Backend)}
        tables = {t.id: t.name for t in s.query(m.Table)}
        parts = {p.id: p.value for p in s.query(m.Partition)}
        root = str(lake.root)
        replicas = sorted((tables[r.table_id], parts[r.partition_id], r.version, r.bucket_seq, names[r.backend_id],
                           r.state, fs.local_path(r.path).replace(root, "<root>"), r.rows, r.bytes, r.checksum,
                           repr(r.files)) for r in s.query(m.Replica))
        counts, sizes = summary.stored(s)
        return {"replicas": replicas,
                "counts": sorted((tables[t], seq, names[be], v) for (t, seq, be), v in counts.items()),
                "sizes": sorted((tables[t], seq, b) for (t, seq), b in sizes.items()),
                "drift": summary.drift(s)}

    return lake.catalog.tx(run)


def _repair(lake: Lake, used: dict, quick: bool, monkeypatch) -> dict:
    real = clones.register_new

    def chosen(*args, **kwargs):
        out = real(*args, **kwargs) if quick else None
        used["quick" if out is not None else "general"] += 1
        return out

    monkeypatch.setattr(clones, "register_new", chosen)
    inner, dropped = lake.runner, []

    def runner(plan):  # while the first batch copies, a partition goes to the recycle bin
        if not dropped:
            dropped.append(lake.catalog.partitions.drop("b", "2026-11-02"))
        return inner(plan)

    return Balancer(lake.catalog, runner, BalanceOptions(grace=timedelta(0), clone_batch_replicas=5),
                    work_dir=lake.work).run()


@pytest.mark.parametrize("catalog_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_the_quick_registration_leaves_what_the_general_one_does(tmp_path, catalog_url, monkeypatch):
    used = {"quick": 0, "general": 0}
    quick = _build(tmp_path / "quick", catalog_url)  # on the database the test asks for
    done_quick = _repair(quick, used, True, monkeypatch)
    # the relocation's batches the quick way; the bad replicas re-cloned in place (a row at their key) the general way
    assert used["quick"] >= 4 and used["general"] >= 1
    state_quick = _state(quick)
    assert_whole(quick.catalog)
    quick.catalog.dispose()

    used = {"quick": 0, "general": 0}
    general = _build(tmp_path / "general", f"sqlite:///{tmp_path / 'general.db'}")
    done_general = _repair(general, used, False, monkeypatch)
    assert used["quick"] == 0 and used["general"] >= 4
    state_general = _state(general)
    general.catalog.dispose()

    assert state_quick["drift"] == [] and state_general["drift"] == []
    assert state_quick == state_general
    assert [j.cloned for j in done_quick["jobs"]] == [j.cloned for j in done_general["jobs"]]
