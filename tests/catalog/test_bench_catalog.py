"""The catalog benchmark's bulk builder records exactly what the write path records: a small lake
built through the real API (begin, targets, commit of every daily write, then gc of the staging
directories) and the same lake inserted in bulk are equal row for row in every table, on SQLite
and PostgreSQL. Whatever the write path starts recording, this test makes the benchmark record
it too, so the figures in docs/benchmarks.md stay about a catalog the product could have written."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_catalog  # noqa: E402

from airflow_colocate.catalog import Catalog, summary  # noqa: E402


def test_bulk_build_equals_the_api_build(catalog_url, tmp_path):
    shape = bench_catalog.Shape(tables=2, days=3, buckets=4, replicas=2, backends=4)
    api = catalog_url
    kind = "sqlite" if catalog_url.startswith("sqlite") else "postgresql"
    bulk = bench_catalog.fresh_url(kind, tmp_path, "bulk", catalog_url)
    bench_catalog.build_api(api, shape, tmp_path / "lake")
    bench_catalog.build_bulk(bulk, shape, tmp_path / "lake")
    got = bench_catalog.snapshot(bulk)
    assert len(got["replicas"]) == shape.replica_rows and len(got["partitions"]) == shape.tables * shape.days
    assert bench_catalog.compare(bench_catalog.snapshot(api), got) == []
    cat = Catalog(bulk)
    assert cat.tx(summary.drift) == []  # the bulk summaries are a recount, as the write path keeps them
    assert cat.health.check_group("lake").stable
    # 3 schema versions per table, the oldest third of the days in the recycle bin
    assert [v.version for v in cat.schemas.history("t0")] == [1, 2, 3]
    dropped = bench_catalog.dropped_days(shape)
    assert dropped and len(cat.partitions.list("t0", dropped=True)) == dropped
    assert len(cat.partitions.list("t0")) == shape.days - dropped
    cat.dispose()
