"""A table whose backends are buckets of a real S3 API (SeaweedFS) published as an Iceberg table:
its data files are named ``s3://`` (what Iceberg's FileIOs open; our backends are ``s3a://``),
pyiceberg reads exactly the rows written, and gc's pins keep naming our ``s3a://`` folders after
an expiry. No Spark."""

from __future__ import annotations

from datetime import timedelta

from balance_lake import rows

from airflow_colocate.jobs import iceberg as publication
from airflow_colocate.jobs.tables import TableChange, alter_table

DAYS = ("2026-11-01", "2026-11-02")


def test_a_published_s3_table_is_read_by_pyiceberg(s3_lake, tmp_path):
    lake, cat = s3_lake, s3_lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    for day in DAYS:
        lake.write("orders", day, range(150))
    alter_table(cat, "orders", TableChange(iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri()))
    assert cat.iceberg.get("orders").lag_reason is None
    tbl = publication.iceberg_catalog(cat).load_table(("default", "orders"))
    named = {e.data_file.file_path for m in tbl.current_snapshot().manifests(tbl.io)
             for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)}
    assert named and all(f.startswith(f"s3://{lake.bucket}/") for f in named)
    got = sorted((r["dt"].isoformat(), r["id"], r["v"]) for r in tbl.scan().to_arrow().to_pylist())
    ours = sorted((day, k, v) for day, part in rows(cat, "orders").items() for k, v in part)
    assert got == ours and len(got) == 300

    dirs = {f.rpartition("/")[0].replace("s3://", "s3a://", 1) for f in named}
    assert cat.iceberg.held(dirs) == dirs  # pinned as the catalog names them
    lake.clock.advance(days=2)
    lines = publication.expire(cat, retention=timedelta(hours=1))
    assert lines == ["default.orders: 0 snapshot(s) expired, 1 retained, 0 replica folder(s) released to gc"]
    assert cat.iceberg.held(dirs) == dirs
