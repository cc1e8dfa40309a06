"""The probe samples replica files, rotating through all of them over successive runs, so a deleted
or truncated file is found without a full verify, marked bad, and repaired by the next balance
(issue 18). Spark-free: the lake writes real parquet files with pyarrow."""

from __future__ import annotations

import math
import os

from balance_lake import assert_whole, rows

from airflow_colocate.jobs.health import probe_backends


def test_sampling_finds_a_deleted_and_a_truncated_file_and_balance_repairs_them(lake):
    lake.create("orders", buckets=4, replicas=2)
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        lake.write("orders", day, range(200))
    want = rows(lake.catalog, "orders")
    _, parts = lake.catalog.reads.replicas("orders")
    by_backend: dict[int, list] = {}
    for p in parts:
        for bucket in p.buckets:
            for r in bucket:
                by_backend.setdefault(r.backend_id, []).append(r)
    be = lake.names["be1"]
    victims = [r for r in by_backend[be] if r.rows][:2]
    (gone, short) = victims
    gone_file = next(os.scandir(gone.path.removeprefix("file://"))).path
    os.remove(gone_file)
    short_file = next(os.scandir(short.path.removeprefix("file://"))).path
    with open(short_file, "r+b") as f:
        f.truncate(10)

    sample = 3
    runs_to_cover = math.ceil(len(by_backend[be]) / sample)
    found: set[str] = set()
    for _ in range(runs_to_cover):
        for result in probe_backends(lake.catalog, timeout=10, sample=sample):
            assert result.ok, result.error  # the backend answers: only its files are wrong
            found.update(result.bad_replicas)
    assert found == {gone.path, short.path}
    health = lake.catalog.health.check_group("g")
    assert not health.stable and "on backend be1" in health.reason
    events = [e.detail.get("reason", "") for e in lake.catalog.events(limit=20) if e.kind == "replica.bad"]
    assert len(events) == 2 and all(r.startswith("probe sample: ") for r in events)

    lake.run()  # repairs the two replicas from their good copies
    assert_whole(lake.catalog)
    assert rows(lake.catalog, "orders") == want
    # a full rotation later nothing is wrong any more
    for _ in range(runs_to_cover + 1):
        assert all(not r.bad_replicas for r in probe_backends(lake.catalog, timeout=10, sample=sample))


def test_a_backend_whose_sample_fails_does_not_stop_the_probe_nor_the_group_check(lake, monkeypatch):
    """One replica directory that cannot be listed (EIO) is reported on its backend's result; the
    other backends are still probed and sampled, and a backend found down makes its group unstable."""
    import errno
    import shutil

    from airflow_colocate.storage import replica_dir

    lake.create("a", buckets=4, replicas=2)
    lake.write("a", "2026-11-01", range(300))
    cat = lake.catalog
    assert cat.health.check_group("g").stable
    shutil.rmtree(lake.root / "backends" / "be3")  # be3 lost: the probe must record it down
    real = replica_dir.replica_entries  # the sample's one listing of a replica (files and folders)

    def failing(path):
        if "/be1/" in path:
            raise OSError(errno.EIO, "Input/output error")
        return real(path)

    monkeypatch.setattr(replica_dir, "replica_entries", failing)
    results = {r.backend.name: r for r in probe_backends(cat, timeout=10, sample=4)}
    assert results["be3"].backend.state == "down"
    assert results["be1"].ok and results["be1"].sample_error is None  # a listing error is that replica's problem
    assert results["be1"].bad_replicas  # ... found and marked bad, as a deleted file would be
    assert results["be2"].ok and results["be2"].sample_error is None
    assert not cat.groups.get("g").stable

    def broken(backend_id, limit):  # the catalog read of one backend's sample fails
        if backend_id == lake.names["be2"]:
            raise RuntimeError("sample query failed")
        return real_sample(backend_id, limit)

    real_sample = cat.health.sample_replicas
    monkeypatch.setattr(cat.health, "sample_replicas", broken)
    results = {r.backend.name: r for r in probe_backends(cat, timeout=10, sample=4)}
    assert results["be2"].sample_error == "RuntimeError: sample query failed"
    assert results["be2"].to_dict()["sample_error"] == "RuntimeError: sample query failed"
    assert results["be1"].sample_error is None
