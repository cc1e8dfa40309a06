"""Issue 30 (6): ``colocate backend set-root`` moves a backend to a root that holds its disk.

The identity marker at the new root must be this backend's (its id, this catalog, the token the
catalog recorded); anything else is refused in one line naming both roots and what was found, and
the catalog is exactly as before. A move rewrites the root and every replica path in one
transaction with one ``backend.root`` event; a registered read and a colocated join then read the
same rows from the new place with the old one gone (real Spark, real files).
"""

from __future__ import annotations

import json
import re
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main
from airflow_colocate.core.contract import ReplicaReport, Source, WriteReport
from airflow_colocate.core.errors import ColocateError, Conflict
from airflow_colocate.jobs.backends import add_backend, reinit_backend, set_backend_root
from airflow_colocate.storage.identity import MARKER

DAY = "2026-11-01"


def fake_write(cat: Catalog, table: str, partition: str) -> None:
    """A committed version as the write job reports it (the catalog needs no files for it)."""
    ticket = cat.writes.begin(table, partition)
    cat.writes.set_targets(ticket.job_id, {seq: [be for be, _ in b] for seq, b in enumerate(ticket.targets)},
                           ticket.missing, {})
    replicas = [ReplicaReport(seq, be, f"{root}/default/{table}/{partition}/v{ticket.version}/b{seq}",
                              ["part-0.parquet"], 10, 100, f"{seq:064x}")
                for seq, bucket in enumerate(ticket.targets) for be, root in bucket]
    cat.writes.commit(ticket.job_id, WriteReport(str(ticket.job_id), ticket.table.qualified_name, partition,
                                                ticket.version, 10 * len(ticket.targets), replicas, 0.1, "test"))


def paths(cat: Catalog) -> dict[int, list[str]]:
    _, parts = cat.reads.replicas("t")
    out: dict[int, list[str]] = {}
    for p in parts:
        for bucket in p.buckets:
            for rep in bucket:
                out.setdefault(rep.backend_id, []).append(rep.path)
    return {k: sorted(v) for k, v in out.items()}


def snapshot(cat: Catalog) -> tuple:
    return ([(b.name, b.root_uri) for b in cat.backends.list()], paths(cat),
            [(e.id, e.kind) for e in cat.events(limit=1000)])


@pytest.fixture
def lake(catalog_url, tmp_path):
    cat = Catalog(catalog_url, actor="pytest")
    cat.init()
    for name in ("be1", "be2", "be3"):
        (tmp_path / "disks" / name).mkdir(parents=True)
        add_backend(cat, (tmp_path / "disks" / name).as_uri(), name=name)
    cat.tables.create("t", [("id", "bigint"), ("dt", "date")], ["id"], bucket_num=6, replication_num=2,
                      partition_cols=["dt"], colocate_with="g")
    for day in ("2026-11-01", "2026-11-02"):
        fake_write(cat, "t", day)
    yield cat, tmp_path
    cat.dispose()


def test_set_root_refuses_a_root_that_is_not_the_backends_disk(lake):
    cat, tmp = lake
    old = cat.backends.get("be1").root_uri
    empty = tmp / "empty"
    empty.mkdir()
    shutil.copytree(tmp / "disks" / "be2", tmp / "be2-copy")  # another backend's disk
    shutil.copytree(tmp / "disks" / "be1", tmp / "be1-stale")  # this backend's disk, then re-initialised
    before = snapshot(cat)
    cases = [
        (empty, f"identity marker {MARKER} is missing under {empty.as_uri()}"),
        (tmp / "be2-copy", "names backend be2 (id 2)"),
        (tmp / "nowhere", "is missing (a lost or unmounted disk)"),
    ]
    for root, found in cases:
        with pytest.raises(ColocateError) as err:
            set_backend_root(cat, "be1", root.as_uri(), reason="test")
        text = str(err.value)
        assert "\n" not in text and found in text, text
        assert text.startswith(f"backend be1's root stays {old}: the new root {root.as_uri()} is not its disk"), text
        assert snapshot(cat) == before
    # inside another backend's root: refused by the catalog, with the marker copied there too
    inside = tmp / "disks" / "be2" / "be1"
    shutil.copytree(tmp / "disks" / "be1", inside)
    with pytest.raises(ColocateError, match="overlaps the root of backend be2"):
        set_backend_root(cat, "be1", inside.as_uri())
    assert snapshot(cat) == before
    # the copy has the old token once the disk in place was re-initialised (kept replicas: same files)
    reinit_backend(cat, "be1", reason="new marker", keep_replicas=True)
    before = snapshot(cat)
    with pytest.raises(ColocateError, match="has another token"):
        set_backend_root(cat, "be1", (tmp / "be1-stale").as_uri())
    assert snapshot(cat) == before


def test_set_root_moves_the_root_and_every_replica_path_in_one_event(lake):
    cat, tmp = lake
    be1 = cat.backends.get("be1")
    old = be1.root_uri
    others = {k: v for k, v in paths(cat).items() if k != be1.id}
    count = len(paths(cat)[be1.id])
    new = tmp / "mnt" / "sdc" / "be1"
    shutil.copytree(tmp / "disks" / "be1", new)
    change = set_backend_root(cat, "be1", new.as_uri() + "/", reason="disk remounted at /mnt/sdc")
    assert change.changed and change.old_root == old and change.replicas == count > 0
    assert cat.backends.get("be1").root_uri == new.as_uri()
    moved = paths(cat)
    assert len(moved[be1.id]) == count and all(p.startswith(new.as_uri() + "/default/t/") for p in moved[be1.id])
    assert {k: v for k, v in moved.items() if k != be1.id} == others
    (event,) = [e for e in cat.events(limit=5) if e.kind == "backend.root"]
    assert event.actor == "pytest" and event.subject == "be1"
    assert event.detail == {"id": be1.id, "old": old, "new": new.as_uri(), "reason": "disk remounted at /mnt/sdc",
                            "replicas": count}
    # again: already there, nothing changes
    events = len(cat.events(limit=1000))
    again = set_backend_root(cat, "be1", new.as_uri())
    assert not again.changed and again.replicas == 0 and len(cat.events(limit=1000)) == events
    # a running write names paths under the root: refused until it ends
    ticket = cat.writes.begin("t", "2026-11-03")
    back = tmp / "disks" / "be1"
    with pytest.raises(Conflict, match=re.escape(f"while write job {ticket.job_id} still uses paths under {new.as_uri()}")):
        set_backend_root(cat, "be1", back.as_uri())
    cat.writes.abort(ticket.job_id, "test")
    assert set_backend_root(cat, "be1", back.as_uri()).backend.root_uri == old  # its old disk still has the marker


def test_set_root_from_the_cli_brings_a_lost_mount_back_with_the_next_probe(lake, monkeypatch, capsys):
    """The disk was remounted elsewhere: the probe found the old root missing (down); set-root
    says it stays down until a probe reaches it there, and the next probe brings it back."""
    from airflow_colocate.jobs.health import probe_backends

    cat, tmp = lake
    new = tmp / "mnt" / "be2"
    new.parent.mkdir()
    (tmp / "disks" / "be2").rename(new)
    assert not {r.backend.name: r for r in probe_backends(cat, timeout=10, sample=0)}["be2"].ok
    monkeypatch.setenv("COLOCATE_CATALOG_URL", cat.url)
    assert main(["backend", "set-root", "be2", new.as_uri(), "--reason", "remounted"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"backend be2 (id 2) moved from {(tmp / 'disks' / 'be2').as_uri()} to {new.as_uri()}: ")
    assert out.endswith("; it stays down until a probe reaches it there ('colocate backend probe be2')"), out
    assert main(["backend", "set-root", "be2", (tmp / "elsewhere").as_uri()]) == 2
    assert "backend be2's root stays" in capsys.readouterr().err
    assert {r.backend.name: r for r in probe_backends(cat, timeout=10, sample=0)}["be2"].backend.state == "alive"


# ---------------------------------------------------------------------- real Spark, real files

SQL = "SELECT o.id, o.v, l.v AS lv FROM orders o JOIN lines l ON o.dt = l.dt AND o.id = l.id"
TABLES = {"orders": None, "lines": None}


@pytest.mark.spark
def test_reads_and_joins_after_set_root_return_the_same_rows(spark, tmp_path, monkeypatch, capsys):
    from airflow_colocate.jobs.join import join_in_session
    from airflow_colocate.jobs.read import query, unregister
    from airflow_colocate.jobs.write import write_in_session

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    cat = Catalog(url, actor="pytest")
    cat.init()
    for name in ("be1", "be2", "be3"):
        (tmp_path / "disks" / name).mkdir(parents=True)
        add_backend(cat, (tmp_path / "disks" / name).as_uri(), name=name)
    columns = [("id", "bigint"), ("v", "string"), ("dt", "date")]
    for table, keys in {"orders": range(600), "lines": range(0, 1200, 2)}.items():
        cat.tables.create(table, columns, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"],
                         colocate_with="g")
        src = tmp_path / "src" / table
        src.mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array(list(keys), pa.int64()), "v": [f"{table[0]}{k}" for k in keys]}),
                       src / "data.parquet")
        write_in_session(spark, cat, table, DAY, Source(format="parquet", path=str(src)), work_dir=tmp_path / "runs")
    try:
        first = join_in_session(spark, cat, SQL, TABLES, work_dir=tmp_path / "runs")
        rows = sorted(tuple(r) for r in query(spark, "SELECT id, v FROM orders", {"orders": None}, catalog=cat))
        unregister(spark)
        assert first["colocate"] and first["rows"] == 300 and len(rows) == 600

        old = tmp_path / "disks" / "be1"
        new = tmp_path / "remounted" / "be1"
        shutil.copytree(old, new)
        shutil.rmtree(old)  # the old mount point is gone: every read must use the new root
        monkeypatch.delenv("COLOCATE_ACTOR", raising=False)
        code = main(["--catalog", url, "--actor", "alice", "backend", "set-root", "be1", new.as_uri(),
                     "--reason", "disk remounted", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["changed"] and out["old_root"] == old.as_uri() and out["new_root"] == new.as_uri()
        assert out["actor"] == "alice" and out["replicas"] > 0 and out["reason"] == "disk remounted"
        assert [e.actor for e in cat.events(limit=5) if e.kind == "backend.root"] == ["alice"]

        again = join_in_session(spark, cat, SQL, TABLES, work_dir=tmp_path / "runs")
        assert again["colocate"] and again["rows"] == first["rows"]
        assert sorted(tuple(r) for r in query(spark, "SELECT id, v FROM orders", {"orders": None}, catalog=cat)) == rows
        assert cat.health.check_group("g").stable  # nothing was marked bad: every replica was where it says
    finally:
        unregister(spark)
        cat.dispose()
