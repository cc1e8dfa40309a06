"""Issue 29 item 5: one backend whose file system cannot be opened does not stop the rest.

Backend be3's root (and its replicas) are moved to ``hdfs://nn.invalid:8020/…``, which pyarrow
cannot open here (no libhdfs, no name node): ``colocate gc``, ``colocate backend probe`` and
``colocate verify`` do their work on be1 and be2, name be3 with the reason, and exit 1.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select, update

from airflow_colocate.catalog import models as m
from airflow_colocate.cli import main
from airflow_colocate.storage import layout

DAY = "2026-11-01"
FAR = "hdfs://nn.invalid:8020/lake/be3"


@pytest.fixture
def far_lake(lake, monkeypatch, capsys):
    """orders written twice (v1 is garbage after the grace) on be1..be3; then be3 unreachable."""
    lake.create("orders")
    lake.write("orders", DAY, range(100))
    lake.write("orders", DAY, range(100))
    cat = lake.catalog
    be3 = lake.root / "backends" / "be3"
    with cat.engine.begin() as c:
        c.execute(update(m.Backend).where(m.Backend.name == "be3").values(root_uri=FAR))
        for rid, path in c.execute(select(m.Replica.id, m.Replica.path)).all():
            if path.startswith(be3.as_uri()):
                c.execute(update(m.Replica).where(m.Replica.id == rid).values(path=FAR + path[len(be3.as_uri()):]))
    monkeypatch.setenv("COLOCATE_CATALOG_URL", str(cat.engine.url))
    monkeypatch.setenv("COLOCATE_HOME", str(lake.root / "home"))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    lake.cli = run
    return lake


def _versions(root: Path) -> set[str]:
    return {p.name for p in root.glob("backends/be[12]/default/orders_*/*/v*")}


def test_gc_cleans_the_reachable_backends_and_names_the_other(far_lake):
    lake = far_lake
    tmp = Path(layout.tmp_dir(str(lake.root / "backends" / "be1")))
    tmp.mkdir(parents=True, exist_ok=True)
    stale = tmp / "part-0.parquet.killed"
    stale.write_bytes(b"x")
    os.utime(stale, (time.time() - 3 * 86400,) * 2)
    assert _versions(lake.root) == {"v000001", "v000002"}

    code, out, err = lake.cli("gc", "--grace-minutes", "0", "--json")
    assert code == 1
    rows = json.loads(out)  # stdout is still the one JSON document
    removed = [r["Uri"] for r in rows if r["Removed"]]
    assert any("/be1/" in u and u.endswith("/v000001") for u in removed), rows
    assert any("/be2/" in u for u in removed) and str(stale.as_uri()) in removed
    (far,) = [r for r in rows if r["Uri"] == "be3"]
    assert far["Reason"].startswith("backend unreachable, skipped: cannot open a file system for hdfs://nn.invalid:8020")
    assert "\n" not in err.strip() and err.startswith("colocate gc: backend be3 unreachable (cannot open a file system")
    assert "gc cleaned the others" in err and "left for the next gc" in err
    assert _versions(lake.root) == {"v000002"} and not stale.exists()
    # be3's garbage stays in the catalog for the next gc: a dry run still skips it and says so
    code, out, err = lake.cli("gc", "--grace-minutes", "0", "--dry-run")
    assert code == 1 and "backend be3 unreachable" in err and "1 item(s) left for the next gc" in err


def test_probe_probes_the_others_and_exits_1(far_lake):
    lake = far_lake
    code, out, err = lake.cli("backend", "probe", "--json", "--sample", "5")
    assert code == 1
    rows = {r["Name"]: r for r in json.loads(out)}
    assert rows["be1"]["Probe"] == rows["be2"]["Probe"] == "ok"
    assert rows["be3"]["Probe"] == "FAILED" and rows["be3"]["State"] == "down"
    assert "cannot open a file system for hdfs://nn.invalid:8020" in rows["be3"]["Error"]
    assert "\n" not in rows["be3"]["Error"] and len(rows["be3"]["Error"]) < 600  # one line, not pyarrow's hundred
    assert err.startswith("colocate backend probe: backend be3 failed the probe (") and "the others were probed" in err
    states = {b.name: b.state for b in lake.catalog.backends.list()}
    assert states == {"be1": "alive", "be2": "alive", "be3": "down"}


@pytest.mark.spark
def test_verify_verifies_the_others_and_exits_1(far_lake, spark, capsys):
    lake = far_lake
    from airflow_colocate.jobs import metrics

    with capsys.disabled():  # Airflow sets its logging up on first use: never on pytest's capture stream
        metrics._stats()
    code, out, err = lake.cli("verify", "--json")
    assert code == 1, err
    summary = json.loads(out)
    (far,) = summary["unreachable"]
    assert far["backend"] == "be3" and far["reason"].startswith("cannot open a file system for hdfs://nn.invalid:8020")
    be3 = lake.names["be3"]
    with lake.catalog.engine.connect() as c:
        on = dict(c.execute(select(m.Replica.backend_id, m.Replica.id).where(m.Replica.state == "verified")).all())
    assert summary["replicas"] > 0 and summary["bad"] == [] and summary["marked_bad"] == []  # be3's are not "bad"
    assert be3 in on  # still verified: an unreachable disk is not a corrupt one
    assert "colocate verify: backend be3 unreachable (" in err and "the others were" in err
