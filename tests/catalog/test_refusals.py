"""Inputs that cannot work are refused with one clear message and leave the catalog unchanged
(issue 13: found accepted by a battery of bad CLI inputs). Run on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_colocate.catalog.checks import normalize_root
from airflow_colocate.core.errors import AlreadyExists, Conflict, InvalidArgument, PlacementError
from airflow_colocate.core.naming import check_partition_literal
from test_catalog import create_orders, snapshot


def test_roots_are_compared_after_collapsing_slashes(catalog, tmp_path):
    catalog.backends.add(f"file://{tmp_path}/be/be1", name="be1")
    before = snapshot(catalog)
    with pytest.raises(AlreadyExists, match="is already backend be1"):
        catalog.backends.add(f"file://{tmp_path}/be//be1", name="be9")
    with pytest.raises(AlreadyExists, match="overlaps backend be1"):
        catalog.backends.add(f"file://{tmp_path}//be", name="be9")
    assert snapshot(catalog) == before
    assert normalize_root("s3a://lake//x///y/") == "s3a://lake/x/y"


@pytest.mark.parametrize("value", ["2026-13-45", "2026-02-30", "20261101", "2026-11-01T00:00:00", "yesterday"])
def test_partition_value_must_be_a_date_for_a_date_column(catalog, backends, value):
    create_orders(catalog)
    before = snapshot(catalog)
    with pytest.raises(InvalidArgument, match=r"for column o_orderdate of type date .*expected '2026-11-01'"):
        catalog.partitions.add("orders", value)
    with pytest.raises(InvalidArgument, match="of type date"):
        catalog.writes.begin("orders", value)
    assert snapshot(catalog) == before
    assert catalog.partitions.add("orders", "2026-02-28").value == "2026-02-28"


@pytest.mark.parametrize("col_type,good,bad", [
    ("int", "42", "4.2"), ("tinyint", "-128", "128"), ("bigint", "9223372036854775807", "9223372036854775808"),
    ("timestamp", "2026-11-01T10:00:00", "2026-11-01T25:00:00"), ("boolean", "true", "yes"),
    ("decimal(15,2)", "12.50", "twelve"), ("string", "anything-goes", None),
])
def test_partition_literals_of_every_type(col_type, good, bad):
    assert check_partition_literal(good, "p", col_type) == good
    if bad is not None:
        with pytest.raises(InvalidArgument, match=f"of type {col_type.replace('(', '.').replace(')', '.')}"):
            check_partition_literal(bad, "p", col_type)


def test_decommission_refused_when_replicas_would_have_nowhere_to_go(catalog, backends):
    create_orders(catalog, replication_num=3)  # replication equals the number of backends
    before = snapshot(catalog)
    with pytest.raises(PlacementError, match=r"cannot be decommissioned: group 1_g_orders keeps 3 replicas .* only 2"):
        catalog.backends.decommission("be1")
    assert snapshot(catalog) == before
    assert catalog.backends.get("be1").state == "alive"


def test_decommission_refused_when_the_other_backends_are_down(catalog, backends):
    create_orders(catalog)  # replication 2 on three backends: fine while all are alive
    catalog.backends.set_state("be2", "down", reason="test")
    catalog.backends.set_state("be3", "down", reason="test")
    before = snapshot(catalog)
    with pytest.raises(PlacementError, match=r"only 0 other alive host\(s\) would remain \(none\)"):
        catalog.backends.decommission("be1")
    assert snapshot(catalog) == before
    # Back up, it is allowed, and an operator can change their mind.
    catalog.backends.set_state("be2", "alive")
    with pytest.raises(PlacementError, match=r"only 1 other alive host\(s\) would remain \(be2@be2\)"):
        catalog.backends.decommission("be1")
    catalog.backends.set_state("be3", "alive")
    assert catalog.backends.decommission("be1").state == "decommissioning"
    assert catalog.backends.cancel_decommission("be1").state == "alive"
    assert [e.kind for e in catalog.events(limit=2)][0] == "backend.decommission_cancelled"
    with pytest.raises(Conflict, match="not decommissioning"):
        catalog.backends.cancel_decommission("be1")


def test_decommission_of_an_unused_backend_needs_no_room(catalog, backends):
    assert catalog.backends.decommission("be3").state == "decommissioning"


def test_negative_retention_and_grace_are_refused(catalog, backends):
    create_orders(catalog)
    catalog.tables.drop("orders")
    before = snapshot(catalog)
    with pytest.raises(InvalidArgument, match="invalid retention -1 day.*must not be negative"):
        catalog.tables.purge_dropped(retention=timedelta(hours=-1))
    with pytest.raises(InvalidArgument, match="invalid grace period .*must not be negative"):
        catalog.writes.garbage(grace=timedelta(minutes=-5))
    with pytest.raises(InvalidArgument, match="invalid stale period"):
        catalog.writes.garbage(stale_after=timedelta(hours=-1))
    assert snapshot(catalog) == before
    assert catalog.tables.recover("orders").name == "orders"


def test_negative_relocate_delay_from_the_environment_is_refused(monkeypatch):
    from airflow_colocate.jobs.health import relocate_delay_from_env

    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "-5")
    with pytest.raises(ValueError, match="must not be negative"):
        relocate_delay_from_env()


def test_atomic_changes_are_all_or_nothing_with_one_event(catalog, backends):
    """``Catalog.atomic`` (issue 48): several repository changes in one transaction; a refusal in
    the last one leaves every row as it was, success writes one event listing each change."""
    catalog.tables.create("solo", [("k", "bigint"), ("dt", "date"), ("v", "int")], ["k"], bucket_num=2,
                          partition_cols=["dt"])
    before = snapshot(catalog)
    with pytest.raises(InvalidArgument, match="biggint"), catalog.atomic("table.alter", "default.solo"):
        catalog.tables.set_replication_num("solo", 2)
        catalog.partitions.set_retention("solo", 3)
        catalog.schemas.alter("solo", add=["x biggint"])
    with pytest.raises(InvalidArgument, match="narrowing"), catalog.atomic("table.alter", "default.solo"):
        catalog.tables.alter_colocate_with("solo", "g_new")  # creates the group, then:
        catalog.schemas.alter("solo", widen=["v smallint"])  # a narrowing
    assert snapshot(catalog) == before
    with catalog.atomic("table.alter", "default.solo"):
        catalog.tables.set_replication_num("solo", 2)
        catalog.schemas.alter("solo", add=["x bigint"])
    t = catalog.tables.get("solo")
    assert t.replication_num == 2 and ("x", "bigint") in t.columns
    event = catalog.events(limit=1)[0]
    assert event.kind == "table.alter" and [c["kind"] for c in event.detail["changes"]] == [
        "table.set_replication_num", "table.alter_schema"]
