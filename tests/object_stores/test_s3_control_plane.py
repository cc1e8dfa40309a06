"""The control plane's operations on backends that are buckets of a real S3 API (SeaweedFS): a
backend's identity marker, writes at replication 1-3, the probe of a lost prefix, the repair that
follows (server-side copies, checked with the store's checksums), decommission and drain,
``set-root``, a killed write's objects and a dropped partition's collected by gc, and a replica
overwritten behind our back refused by the copy that would spread it. No Spark here: the Spark
side (write job, colocated join, register, verify) is test_s3_spark.py."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from balance_lake import assert_whole, rows

from airflow_colocate.core.contract import Source
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.backends import change_state, set_backend_root
from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.jobs.write import prepare_write
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import fs, identity, s3

DAYS = ("2026-11-01", "2026-11-02")


def objects(server, root: str) -> set[str]:
    """Every object key under a backend's root, listed by boto3 (not by the code under test)."""
    bucket, prefix = s3.bucket_key(root)
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {f"{bucket}/{o['Key']}" for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/")}


def data_objects(server, lake) -> set[str]:
    out = set()
    for b in lake.catalog.backends.list():
        out |= {k for k in objects(server, b.root_uri) if k.endswith(".parquet")}
    return out


def test_backend_add_puts_its_identity_marker_and_writes_keep_every_replication(s3_lake, s3_server):
    lake = s3_lake
    b = lake.add_backend("be4")
    root = b.root_uri
    marker = identity.read_marker(root)
    assert marker is not None and marker["backend_id"] == b.id
    assert [k for k in objects(s3_server, root) if ".tmp" in k] == []  # one PUT, no temporary sibling
    for replicas in (1, 2, 3):
        table = f"t{replicas}"
        lake.create(table, group=f"g{replicas}", replicas=replicas)
        lake.write(table, DAYS[0], range(150))
        assert rows(lake.catalog, f"default.{table}")[DAYS[0]] == sorted(
            (k, f"{table}-{DAYS[0]}-{k}") for k in range(150))
        assert_whole(lake.catalog, f"g{replicas}")


def test_a_lost_prefix_is_probed_down_and_repaired_by_server_side_copies(s3_lake, s3_server):
    lake = s3_lake
    lake.create("orders")
    lake.create("lines")
    for day in DAYS:
        lake.write("orders", day, range(200))
        lake.write("lines", day, range(0, 400, 2))
    before = {t: rows(lake.catalog, f"default.{t}") for t in ("orders", "lines")}
    be2 = lake.catalog.backends.get("be2")
    fs.delete_tree(be2.root_uri)  # the prefix is gone, marker and all
    assert objects(s3_server, be2.root_uri) == set()
    results = {r.backend.name: r for r in probe_backends(lake.catalog, timeout=10)}
    assert not results["be2"].ok and "missing" in results["be2"].error
    assert objects(s3_server, be2.root_uri) == set()  # the probe did not bring an empty root back
    lake.clock.advance(minutes=31)
    lake.run()
    assert_whole(lake.catalog)
    assert {t: rows(lake.catalog, f"default.{t}") for t in ("orders", "lines")} == before
    assert be2.id not in {be for ids in lake.catalog.groups.get("g").bucket_map for be in ids}
    assert objects(s3_server, be2.root_uri) == set()


def test_decommission_drains_a_backend_and_set_root_follows_a_moved_bucket(s3_lake, s3_server):
    lake = s3_lake
    lake.create("orders")
    lake.write("orders", DAYS[0], range(300))
    before = rows(lake.catalog, "default.orders")
    change_state(lake.catalog, "be3", "decommission", reason="hardware refresh")
    lake.run()
    assert lake.catalog.backends.get("be3").state in ("decommissioning", "decommissioned")
    assert lake.names["be3"] not in {be for ids in lake.catalog.groups.get("g").bucket_map for be in ids}
    assert rows(lake.catalog, "default.orders") == before
    assert_whole(lake.catalog)

    # be1's objects move to another bucket (an operator's `aws s3 sync`): set-root follows them
    be1 = lake.catalog.backends.get("be1")
    client, (old_bucket, old_prefix) = s3_server.client(), s3.bucket_key(be1.root_uri)
    new_bucket = s3_server.make_bucket(f"moved-{old_bucket}")
    for name in objects(s3_server, be1.root_uri):
        key = name.split("/", 1)[1]
        client.copy_object(Bucket=new_bucket, Key=key, CopySource={"Bucket": old_bucket, "Key": key})
    change = set_backend_root(lake.catalog, "be1", f"s3a://{new_bucket}/{old_prefix}", reason="bucket moved")
    assert change.changed and change.replicas > 0
    fs.delete_tree(be1.root_uri)
    assert rows(lake.catalog, "default.orders") == before
    assert_whole(lake.catalog)


def test_gc_removes_a_killed_writes_objects_and_a_dropped_partitions(s3_lake, s3_server):
    lake = s3_lake
    lake.create("orders")
    lake.write("orders", DAYS[0], range(100))
    committed = data_objects(s3_server, lake)
    # a write killed after its objects landed and before its commit: objects no version names
    ticket, plan = prepare_write(lake.catalog, "orders", DAYS[1], Source(format="parquet", path=str(lake.root)),
                                 work_dir=lake.work)
    for b in plan.buckets:
        for r in b.replicas:
            with fs.open_write(fs.join(r.path, f"part-killed_{b.bucket_seq:05d}.c000.snappy.parquet")) as f:
                f.write(b"half a write")
    orphans = data_objects(s3_server, lake) - committed
    assert len(orphans) == 8  # 4 buckets x 2 replicas
    lake.clock.advance(hours=25)
    collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    lake.clock.advance(hours=2)
    result = collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    assert not result.failed and not result.unreachable
    assert data_objects(s3_server, lake) == committed
    assert rows(lake.catalog, "default.orders") == {DAYS[0]: sorted((k, f"orders-{DAYS[0]}-{k}") for k in range(100))}

    lake.catalog.partitions.drop("orders", DAYS[0])
    lake.catalog.partitions.purge_dropped(retention=timedelta(0))
    collect_garbage(lake.catalog, grace=timedelta(0), stale_after=timedelta(hours=24))
    assert data_objects(s3_server, lake) == set()


def test_a_replica_overwritten_behind_our_back_is_not_spread_by_a_server_side_copy(s3_lake, s3_server):
    lake = s3_lake
    lake.create("orders", replicas=1)
    lake.write("orders", DAYS[0], range(100))
    _, parts = lake.catalog.reads.replicas("default.orders")
    replica = next(r for bucket in parts[0].buckets for r in bucket)
    (name, _), = [f for f in fs.list_files(replica.path) if f[0].endswith(".parquet")]
    src = fs.join(replica.path, name)
    recorded = copy_mod.sha256_file(src)
    bucket, key = s3.bucket_key(src)
    s3_server.client().put_object(Bucket=bucket, Key=key, Body=b"not the committed bytes")
    dst = fs.join(lake.catalog.backends.get("be2").root_uri, "scratch/copy.parquet")
    with pytest.raises(ColocateError, match="failed its check|checksum mismatch"):
        copy_mod.copy_file(src, dst, expect_sha256=recorded)
    assert not fs.exists(dst)
    # the same copy of good bytes is the store's: checked by its checksum, not read back here
    s3_server.client().put_object(Bucket=bucket, Key=key, Body=b"good bytes")
    good = copy_mod.sha256_file(src)
    assert copy_mod.copy_file(src, dst, expect_sha256=good) == (len(b"good bytes"), good)


def test_doctor_says_where_the_key_comes_from_and_never_prints_it(s3_lake, s3_env, capsys):
    import json

    from airflow_colocate.cli import main

    main(["--catalog", s3_lake.catalog.url, "doctor", "--json"])
    out = capsys.readouterr().out
    facts = json.loads(out)
    stores = facts["object_stores"]
    assert stores["credentials"].startswith("the environment (AWS_ACCESS_KEY_ID")
    assert stores["endpoint"] == s3_env["AWS_ENDPOINT_URL"] and stores["server_side_copy"] is True
    assert all(b["reachable"] for b in facts["backends"]), facts["backends"]
    assert s3_env["AWS_SECRET_ACCESS_KEY"] not in out
    main(["--catalog", s3_lake.catalog.url, "doctor"])
    text = capsys.readouterr().out
    assert "credentials from" in text and s3_env["AWS_SECRET_ACCESS_KEY"] not in text



def test_an_object_above_the_single_copy_limit_is_copied_part_by_part_and_read_back(s3_lake, s3_server, monkeypatch,
                                                                                      tmp_path):
    """The limit lowered from 5 GiB to 6 MiB (a module constant; parts of 5 MiB, the least S3 takes
    but for the last): a clone's copy of an 11 MiB object is three UploadPartCopy parts, whose
    checksum is of parts, so the copy is read back and hashed against the catalog's; a source
    overwritten behind our back fails that check and the copy is deleted."""
    import hashlib
    import os

    monkeypatch.setattr(s3, "MULTIPART_COPY_BYTES", 6 * 1024 ** 2)
    monkeypatch.setattr(s3, "MULTIPART_PART_BYTES", 5 * 1024 ** 2)
    body = os.urandom(11 * 1024 ** 2)
    local = tmp_path / "big.parquet"
    local.write_bytes(body)
    be1, be2 = (lake_root(s3_lake, n) for n in ("be1", "be2"))
    src, dst = fs.join(be1, "big/part-0.parquet"), fs.join(be2, "big/part-0.parquet")
    digest = hashlib.sha256(body).hexdigest()
    assert copy_mod.copy_file(local.as_uri(), src, expect_sha256=digest) == (len(body), digest)
    staged = copy_mod.stage_file(src, dst, expect_sha256=digest, expect_bytes=len(body))
    assert (staged.bytes, staged.sha256) == (len(body), digest)
    bucket, key = s3.bucket_key(dst)
    head = s3_server.client().head_object(Bucket=bucket, Key=key)
    assert head["ETag"].strip('"').endswith("-3") and head["ContentLength"] == len(body)  # three parts
    assert copy_mod.sha256_file(dst) == digest
    sb, sk = s3.bucket_key(src)
    s3_server.client().put_object(Bucket=sb, Key=sk, Body=body[::-1])  # same size, other bytes
    with pytest.raises(ColocateError, match="failed its check"):
        copy_mod.stage_file(src, fs.join(be2, "big/again.parquet"), expect_sha256=digest, expect_bytes=len(body))
    assert not fs.exists(fs.join(be2, "big/again.parquet"))


def lake_root(lake, name: str) -> str:
    return lake.catalog.backends.get(name).root_uri


def _recorded_etags(catalog) -> dict[str, dict[str, str] | None]:
    from sqlalchemy import select

    from airflow_colocate.catalog import models as m

    with catalog.engine.connect() as conn:  # read as stored, not through the code under test
        return dict(conn.execute(select(m.Replica.path, m.Replica.etags).where(m.Replica.state == "verified")).all())


def test_a_repair_copies_against_the_recorded_etags_and_refuses_a_source_overwritten_since(s3_lake, s3_server):
    """Each file's ETag is recorded with its write (the MD5 of its bytes on this store), a repair
    copies with ``CopySourceIfMatch`` and takes the answer's ETag as its proof (no HEAD), and a
    source overwritten after its ETag was recorded is refused (the store answers 412, the copy made
    without the condition fails the SHA-256 check), marked bad, and both its bucket's new replica
    and the bad one are cloned from the other good replica: its wrong rows are never spread."""
    import base64
    import hashlib

    lake, client = s3_lake, s3_server.client()
    lake.add_backend("be4")
    lake.create("orders", replicas=3)
    for day in DAYS:
        lake.write("orders", day, range(300))
    before = rows(lake.catalog, "default.orders")
    recorded = _recorded_etags(lake.catalog)
    for path, etags in recorded.items():  # the store's MD5 of the bytes the write proved
        bucket, prefix = s3.bucket_key(path)
        assert etags and {n: hashlib.md5(client.get_object(Bucket=bucket, Key=f"{prefix}/{n}")["Body"].read()).hexdigest()
                          for n in etags} == etags

    be2 = lake.catalog.backends.get("be2")
    _, parts = lake.catalog.reads.replicas("default.orders")
    # a bucket on be2 whose first surviving replica (the one its repair copies from) holds a file
    lost = next(b for p in parts for b in p.buckets if any(r.backend_id == be2.id for r in b)
                and any(r.backend_id != be2.id and r.bytes for r in b))
    source = min((r for r in lost if r.backend_id != be2.id), key=lambda r: r.backend_id)
    name = next(iter(recorded[source.path]))
    bucket, prefix = s3.bucket_key(source.path)
    good = client.get_object(Bucket=bucket, Key=f"{prefix}/{name}")["Body"].read()
    wrong = bytearray(good)
    wrong[len(wrong) // 2] ^= 0xFF  # one byte, the size kept: no listing can tell
    client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=bytes(wrong))  # behind our back

    fs.delete_tree(be2.root_uri)
    probe_backends(lake.catalog, timeout=10)
    lake.clock.advance(minutes=31)
    calls = {"CopyObject": 0, "HeadObject": 0}
    made = []

    counting = threading.Lock()  # the clone job's threads call it at once

    def count(event_name, params, **_):
        with counting:
            calls[event_name.rsplit(".", 1)[1]] += 1
            made.append((event_name.rsplit(".", 1)[1], params.get("Key"), params.get("CopySourceIfMatch")))

    events = s3._client().meta.events
    for op in calls:
        events.register(f"before-parameter-build.s3.{op}", count)
    try:
        lake.run()
    finally:
        for op in calls:
            events.unregister(f"before-parameter-build.s3.{op}", count)
    assert_whole(lake.catalog)  # every replica's files hash to the catalog's checksum
    assert rows(lake.catalog, "default.orders") == before
    assert hashlib.md5(client.get_object(Bucket=bucket, Key=f"{prefix}/{name}")["Body"].read()).hexdigest() \
        == recorded[source.path][name]  # the overwritten replica was repaired from the good one
    # one request a copied file, but for the refused source: its 412, its unconditional copy and
    # that copy's HEAD (the SHA-256 that refused it)
    copied = sum(len(e or {}) for p, e in _recorded_etags(lake.catalog).items() if p not in recorded) \
        + len(recorded[source.path])
    assert calls == {"CopyObject": copied + 2, "HeadObject": 1}, (calls, copied, made)
    # a copy made under the ETag condition did not ask for a checksum, and keeps its source's SHA-256
    # (what proves the next copy made from it when its ETag no longer matches)
    new = [(p, n) for p, e in _recorded_etags(lake.catalog).items() if p not in recorded for n in (e or {})]
    assert new
    for path, n in new:
        b, k = s3.bucket_key(f"{path}/{n}")
        head = client.head_object(Bucket=b, Key=k, ChecksumMode="ENABLED")
        body = client.get_object(Bucket=b, Key=k)["Body"].read()
        assert base64.b64decode(head["ChecksumSHA256"]) == hashlib.sha256(body).digest(), (path, n)
