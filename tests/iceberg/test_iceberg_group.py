"""Publication per group and per task: 'colocate group alter G --iceberg on' publishes every table
of the group now and every table created in it or moved into it later, off stops them all; a write task's
``iceberg=True`` turns its table on before the write, whose commit publishes it. Bad input (an
unknown group, on without a warehouse, a warehouse with off) is refused in one line and changes
nothing. pyiceberg reads, no Spark."""

from __future__ import annotations

from datetime import date

import pytest
from iceberg_lake import iceberg_table, make_lake, normal, theirs

from airflow_colocate.cli import main
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.jobs import iceberg as publication
from airflow_colocate.jobs.write import ensure_table


def expected(table: str, days, keys) -> list[tuple]:
    return normal({"id": k, "v": f"{table}-{d}-{k}", "dt": date.fromisoformat(d)} for d in days for k in keys)


def test_a_group_publishes_its_tables_and_those_created_later(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(publication.WAREHOUSE_ENV, raising=False)
    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat, url = lake.catalog, lake.catalog.url
    warehouse = (tmp_path / "wh").as_uri()
    for table in ("orders", "lines"):
        lake.create(table, buckets=3, replicas=2)
        lake.write(table, "2026-11-01", range(60))
    lake.create("other", group="h", buckets=3, replicas=2)

    # refused in one line, nothing changed
    for args, why in ((["nosuch", "--iceberg", "on", "--iceberg-warehouse", warehouse], "unknown colocation group 'nosuch'"),
                      (["g", "--iceberg", "on"], "needs a warehouse"),
                      (["g", "--iceberg", "off", "--iceberg-warehouse", warehouse], "goes with --iceberg on"),
                      (["g", "--iceberg", "on", "--iceberg-warehouse", "lake"], "invalid --iceberg-warehouse")):
        assert main(["--catalog", url, "group", "alter", *args]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1, err
    assert cat.iceberg.list(enabled_only=False) == []

    assert main(["--catalog", url, "group", "alter", "g", "--iceberg", "on", "--iceberg-warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    assert "default.orders: Iceberg snapshot" in out and "default.lines: Iceberg snapshot" in out
    assert theirs(lake, "orders") == expected("orders", ["2026-11-01"], range(60))
    assert theirs(lake, "lines") == expected("lines", ["2026-11-01"], range(60))
    assert [p.table for p in cat.iceberg.list()] == ["default.orders", "default.lines"]  # not group h's table

    # a table created in the group later is published by its first write
    lake.create("items", buckets=3, replicas=2)
    lake.write("items", "2026-11-02", range(30))
    assert theirs(lake, "items") == expected("items", ["2026-11-02"], range(30))
    assert main(["--catalog", url, "table", "alter", "other", "--colocate-with", "g"]) == 0  # and one moved into it
    assert cat.iceberg.get("other").enabled

    # off: every table of the group stops; a write after it is not published
    assert main(["--catalog", url, "group", "alter", "g", "--iceberg", "off"]) == 0
    assert cat.iceberg.list() == [] and len(cat.iceberg.list(enabled_only=False)) == 4
    lake.write("orders", "2026-11-02", range(10))
    assert theirs(lake, "orders") == expected("orders", ["2026-11-01"], range(60))
    lake.create("later", buckets=3, replicas=2)
    assert cat.iceberg.find(cat.tables.get("later").id) is None
    cat.dispose()


def test_a_write_tasks_iceberg_argument(tmp_path, monkeypatch):
    from airflow_colocate.operators.write import ColocateWriteOperator

    monkeypatch.delenv(publication.WAREHOUSE_ENV, raising=False)
    op = ColocateWriteOperator(task_id="w", table="orders", iceberg=True, iceberg_warehouse="{{ var.value.wh }}")
    assert "iceberg_warehouse" in op.template_fields and op.iceberg is True

    lake = make_lake(f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path)
    cat = lake.catalog
    lake.create("orders", buckets=3, replicas=2)
    lake.write("orders", "2026-11-01", range(40))
    with pytest.raises(InvalidArgument, match="needs a warehouse"):
        ensure_table(cat, "orders", None, iceberg=True)
    with pytest.raises(InvalidArgument, match="goes with iceberg=True"):
        ensure_table(cat, "orders", None, iceberg=None, iceberg_warehouse=(tmp_path / "wh").as_uri())
    assert cat.iceberg.list(enabled_only=False) == []
    ensure_table(cat, "orders", None, iceberg=True, iceberg_warehouse=(tmp_path / "wh").as_uri())
    lake.write("orders", "2026-11-02", range(40))  # the task's commit publishes the table, history and all
    assert theirs(lake) == expected("orders", ["2026-11-01", "2026-11-02"], range(40))
    assert len(iceberg_table(lake).metadata.snapshots) == 1
    ensure_table(cat, "orders", None, iceberg=True)  # on already: nothing changes, no warehouse needed
    ensure_table(cat, "orders", None, iceberg=False)
    assert cat.iceberg.list() == []
    cat.dispose()
