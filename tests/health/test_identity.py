"""A backend has an identity on disk: a lost, emptied or swapped disk is down with that reason, the
probe never recreates it, and only an explicit re-initialisation writes a new marker (issue 18)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.backends import add_backend, reinit_backend
from airflow_colocate.jobs.health import probe_backends
from airflow_colocate.storage.identity import MARKER


@pytest.fixture
def lake(catalog_url, tmp_path):
    cat = Catalog(catalog_url, actor="pytest", clock=lambda: datetime(2026, 11, 1, 8, 0, tzinfo=timezone.utc))
    cat.init()
    for i in (1, 2, 3):
        (tmp_path / f"be{i}").mkdir()
        add_backend(cat, (tmp_path / f"be{i}").as_uri(), name=f"be{i}")
    cat.tables.create("t", [("id", "bigint")], ["id"], bucket_num=3, replication_num=2, colocate_with="g")
    yield cat, tmp_path
    cat.dispose()


def probe(cat) -> dict:
    return {r.backend.name: r for r in probe_backends(cat, timeout=10)}


def test_add_writes_a_marker_with_the_catalog_and_backend_ids(lake):
    cat, root = lake
    marker = json.loads((root / "be2" / MARKER).read_text())
    assert marker["backend_id"] == cat.backends.get("be2").id and marker["catalog_id"] == cat.backends.catalog_uid()
    assert marker["token"] == cat.backends.markers()[cat.backends.get("be2").id]
    assert all(r.ok for r in probe(cat).values())


def test_a_deleted_root_is_down_and_never_recreated(lake):
    cat, root = lake
    shutil.rmtree(root / "be2")
    result = probe(cat)["be2"]
    assert not result.ok and "is missing" in result.error
    assert not (root / "be2").exists()  # the probe did not bring an empty disk back
    b = cat.backends.get("be2")
    assert b.state == "down"
    assert not cat.groups.get("g").stable and "be2" in cat.groups.get("g").unstable_reason


def test_an_empty_disk_in_its_place_is_down_until_reinitialised(lake):
    cat, root = lake
    shutil.rmtree(root / "be2")
    (root / "be2").mkdir()  # a new, empty disk mounted at the same path
    result = probe(cat)["be2"]
    assert not result.ok and "identity marker _colocate/backend.json is missing" in result.error
    assert not (root / "be2" / MARKER).exists()
    b, lost = reinit_backend(cat, "be2", reason="disk sdb replaced")
    assert lost == 0  # a table without data has no replicas to lose
    assert probe(cat)["be2"].ok and cat.backends.get("be2").state == "alive"
    events = [(e.kind, e.detail.get("reason")) for e in cat.events(limit=10)]
    assert ("backend.reinit", "disk sdb replaced") in events


def test_a_swapped_disk_is_recognised(lake):
    cat, root = lake
    shutil.copy(root / "be3" / MARKER, root / "be2" / MARKER)  # be3's disk now answers at be2's root
    result = probe(cat)["be2"]
    assert not result.ok and "names backend be3" in result.error


def test_a_marker_of_another_catalog_is_recognised(lake, tmp_path):
    cat, root = lake
    marker = json.loads((root / "be2" / MARKER).read_text())
    (root / "be2" / MARKER).write_text(json.dumps(dict(marker, catalog_id="someone-else")))
    assert "another catalog or backend" in probe(cat)["be2"].error


def test_add_refuses_a_missing_root_and_leaves_no_backend(lake, tmp_path):
    cat, _ = lake
    with pytest.raises(ColocateError, match="does not exist: create it"):
        add_backend(cat, (tmp_path / "nowhere").as_uri(), name="be9")
    assert [b.name for b in cat.backends.list()] == ["be1", "be2", "be3"]


def test_reinit_needs_a_reason(lake):
    cat, _ = lake
    with pytest.raises(ColocateError, match="needs a reason"):
        reinit_backend(cat, "be1", reason=" ")


def _listing(path) -> list[str] | None:
    """Every file and folder under ``path`` (None: ``path`` itself does not exist)."""
    if not path.exists():
        return None
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("root_of, options, message", [
    (lambda tmp: tmp / "fresh", {"name": "bad name"}, "invalid backend name"),
    (lambda tmp: tmp / "fresh", {"name": "be1"}, "is taken by backend id"),
    (lambda tmp: tmp / "fresh", {"name": "be9", "host": "two words"}, "invalid host"),
    (lambda tmp: tmp / "fresh", {"name": "be9", "capacity_bytes": -1}, "invalid capacity"),
    (lambda tmp: tmp / "be1" / "inner", {"name": "be9"}, "overlaps backend be1"),
    (lambda tmp: tmp / "be2", {"name": "be9"}, "is already backend be2"),
    (lambda tmp: tmp / "nowhere", {"name": "be9"}, "does not exist: create it"),
], ids=["name", "taken-name", "host", "capacity", "nested", "same-root", "missing-root"])
def test_a_refused_add_leaves_the_root_as_it_was(lake, tmp_path, root_of, options, message):
    """Issue 27: a refused add used to leave a ``_colocate`` folder (its write probe) in the root
    it refused; a root that does not exist is still not created."""
    cat, _ = lake
    root = root_of(tmp_path)
    if root.name in ("fresh", "inner"):
        root.mkdir()
        (root / "data.parquet").write_bytes(b"PAR1")  # a user's file: it stays, alone
    before, events = _listing(root), len(cat.events(limit=1000))
    with pytest.raises(ColocateError, match=message):
        add_backend(cat, root.as_uri(), **options)
    assert _listing(root) == before
    assert [b.name for b in cat.backends.list()] == ["be1", "be2", "be3"] and len(cat.events(limit=1000)) == events


def test_an_add_whose_marker_cannot_be_written_takes_back_what_it_made(lake, tmp_path, monkeypatch):
    """The disk fills up between the probe and the marker (the outer edge: the file system's
    rename fails): no backend is listed, and neither the marker folder nor a temporary file stays."""
    from airflow_colocate.storage import fs

    cat, _ = lake
    root = tmp_path / "fresh"
    root.mkdir()
    real_rename = fs.rename

    def disk_full(src, dst):
        if dst.endswith("backend.json"):
            raise OSError(28, "No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr(fs, "rename", disk_full)
    with pytest.raises(OSError, match="No space left"):
        add_backend(cat, root.as_uri(), name="be9")
    assert _listing(root) == []
    assert [b.name for b in cat.backends.list()] == ["be1", "be2", "be3"]
