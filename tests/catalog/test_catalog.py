"""Seed semantics of the catalog, run on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import MetaData, select

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.errors import (
    AlreadyExists,
    ColocateError,
    Conflict,
    InvalidArgument,
    NotFound,
    PlacementError,
    SchemaMismatch,
)
from colocate_testing import add_local_backends

ORDERS = [("o_orderkey", "bigint"), ("o_custkey", "bigint"), ("o_orderdate", "date"), ("o_totalprice", "decimal(15,2)")]
LINEITEM = [("l_orderkey", "long"), ("l_linenumber", "int"), ("l_quantity", "decimal(15,2)"), ("l_shipdate", "date")]


def snapshot(catalog: Catalog) -> dict:
    """Every row of every catalog table: a refused call must leave this unchanged."""
    meta = MetaData()
    meta.reflect(catalog.engine)
    with catalog.engine.connect() as conn:
        return {name: sorted(map(repr, conn.execute(select(t)).all())) for name, t in meta.tables.items()}


def create_orders(catalog, **kw):
    args = dict(bucket_num=8, replication_num=2, partition_cols=["o_orderdate"], colocate_with="g_orders")
    args.update(kw)
    return catalog.tables.create("orders", ORDERS, ["o_orderkey"], **args)


def test_init_is_idempotent_and_creates_default_db(catalog):
    catalog.init()
    catalog.check_schema()
    assert catalog.tables.list() == []


def test_uninitialised_catalog_is_refused_with_the_fix(tmp_path):
    cat = Catalog(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(ColocateError, match="run 'colocate init' first"):
        cat.check_schema()


def test_parent_table_creates_group_and_round_robin_map(catalog, backends):
    t = create_orders(catalog)
    g = catalog.groups.get("g_orders")
    assert t.group_id == g.group_id == f"{g.db_id}.{g.grp_id}"
    assert g.full_name == f"{g.db_id}_g_orders"
    assert g.dist_col_types == ("bigint",) and g.bucket_num == 8 and g.replication_num == 2
    assert len(g.bucket_map) == 8
    for ids in g.bucket_map:
        assert len(ids) == 2 and len(set(ids)) == 2
    assert g.stable and g.table_ids == (t.id,)
    # lookup by id, full name and name agree
    assert catalog.groups.get(g.group_id) == catalog.groups.get(g.full_name) == g


def test_child_table_names_may_differ_types_may_not(catalog, backends):
    create_orders(catalog)
    # l_orderkey is 'long' = bigint; partitioned by another column; not partitioned would do too
    li = catalog.tables.create("lineitem", LINEITEM, ["l_orderkey"], bucket_num=8, replication_num=2,
                              partition_cols=["l_shipdate"], colocate_with="g_orders")
    plain = catalog.tables.create("orders_daily", ORDERS, ["o_orderkey"], bucket_num=8, replication_num=2,
                                 colocate_with="g_orders")
    g = catalog.groups.get("g_orders")
    assert g.table_ids == (g.table_ids[0], li.id, plain.id)
    assert catalog.tables.get("lineitem").dist_cols == ("l_orderkey",)


@pytest.mark.parametrize(
    "cols, dist, buckets, replicas, message",
    [
        (LINEITEM, ["l_linenumber"], 8, 2, "distribution column 1 has type int, the group needs bigint"),
        (LINEITEM, ["l_orderkey"], 16, 2, "bucket count is 16, the group needs 8"),
        (LINEITEM, ["l_orderkey"], 8, 3, "replication_num is 3, the group needs 2"),
        (LINEITEM, ["l_orderkey", "l_linenumber"], 8, 2, "it has 2 distribution columns (bigint, int), the group has 1 (bigint)"),
    ],
)
def test_cgs_mismatch_names_exactly_what_differs(catalog, backends, cols, dist, buckets, replicas, message):
    create_orders(catalog)
    before = snapshot(catalog)
    with pytest.raises(SchemaMismatch) as err:
        catalog.tables.create("lineitem", cols, dist, bucket_num=buckets, replication_num=replicas, colocate_with="g_orders")
    assert message in str(err.value)
    assert "g_orders" in str(err.value)
    assert snapshot(catalog) == before


def test_cgs_mismatch_lists_every_difference(catalog, backends):
    create_orders(catalog)
    with pytest.raises(SchemaMismatch) as err:
        catalog.tables.create("x", [("k", "string")], ["k"], bucket_num=4, replication_num=3, colocate_with="g_orders")
    text = str(err.value)
    assert "type string, the group needs bigint" in text and "bucket count is 4" in text and "replication_num is 3" in text


def test_type_position_matters(catalog, backends):
    cols = [("a", "bigint"), ("b", "string"), ("d", "date")]
    catalog.tables.create("t1", cols, ["a", "b"], bucket_num=4, replication_num=1, colocate_with="g2")
    with pytest.raises(SchemaMismatch, match="column 1 has type string, the group needs bigint; distribution column 2 has type bigint"):
        catalog.tables.create("t2", cols, ["b", "a"], bucket_num=4, replication_num=1, colocate_with="g2")


def test_partition_add_is_checked_against_the_group(catalog, backends):
    create_orders(catalog)
    catalog.partitions.add("orders", "2026-11-01")
    before = snapshot(catalog)
    with pytest.raises(SchemaMismatch, match="bucket count is 4, the group needs 8"):
        catalog.partitions.add("orders", "2026-11-02", bucket_num=4)
    with pytest.raises(SchemaMismatch, match="replication_num is 1, the group needs 2"):
        catalog.partitions.add("orders", "2026-11-02", replication_num=1)
    with pytest.raises(AlreadyExists):
        catalog.partitions.add("orders", "2026-11-01")
    for bad in ("../etc", "a/b", "..", ".hidden", "x y", "", "2026-11-01/../../x"):
        with pytest.raises(InvalidArgument, match="invalid partition value"):
            catalog.partitions.add("orders", bad)
    assert snapshot(catalog) == before
    assert [p.value for p in catalog.partitions.list("orders", empty=True)] == ["2026-11-01"]


def test_replication_change_of_group_table_is_refused(catalog, backends):
    create_orders(catalog)
    before = snapshot(catalog)
    with pytest.raises(SchemaMismatch, match="replication_num = 2"):
        catalog.tables.set_replication_num("orders", 3)
    assert snapshot(catalog) == before
    plain = catalog.tables.create("plain", ORDERS, ["o_orderkey"], bucket_num=4, replication_num=1)
    assert catalog.tables.set_replication_num("plain", 3).replication_num == 3
    with pytest.raises(PlacementError, match="needs 4 alive backends on distinct hosts, but only 3"):
        catalog.tables.set_replication_num(plain.name, 4)


def test_alter_moves_between_groups_and_out(catalog, backends):
    create_orders(catalog)
    catalog.tables.create("li", LINEITEM, ["l_orderkey"], bucket_num=8, replication_num=2, colocate_with="g_orders")
    # to a new group: created with li as its parent
    t = catalog.tables.alter_colocate_with("li", "g_new")
    g_new = catalog.groups.get("g_new")
    assert t.group_id == g_new.group_id and g_new.table_ids == (t.id,)
    # into an existing group that does not fit: refused, nothing changes
    catalog.tables.create("small", [("k", "bigint")], ["k"], bucket_num=4, replication_num=2, colocate_with="g_small")
    before = snapshot(catalog)
    with pytest.raises(SchemaMismatch, match="bucket count is 8, the group needs 4"):
        catalog.tables.alter_colocate_with("li", "g_small")
    assert snapshot(catalog) == before
    # out of its group: the group it leaves empty goes with it
    t = catalog.tables.alter_colocate_with("li", "")
    assert t.group_id is None
    with pytest.raises(NotFound):
        catalog.groups.get("g_new")
    # back into the original group
    assert catalog.tables.alter_colocate_with("li", "g_orders").group_name == catalog.groups.get("g_orders").full_name == "1_g_orders"


def test_drop_recover_and_purge_with_retention(catalog_url, tmp_path):
    now = [datetime(2026, 11, 1, tzinfo=timezone.utc)]
    cat = Catalog(catalog_url, actor="pytest", clock=lambda: now[0])
    cat.init()
    add_local_backends(cat, tmp_path / "b")
    create_orders(cat)
    cat.tables.create("li", LINEITEM, ["l_orderkey"], bucket_num=8, replication_num=2, colocate_with="g_orders")
    cat.tables.drop("orders")
    assert [t.name for t in cat.tables.list()] == ["li"]
    assert len(cat.groups.get("g_orders").table_ids) == 1
    cat.tables.recover("orders")
    assert sorted(t.name for t in cat.tables.list()) == ["li", "orders"]
    cat.tables.drop("orders")
    cat.tables.drop("li")
    now[0] += timedelta(hours=23)
    assert cat.tables.purge_dropped() == []  # still within the default retention of one day
    assert cat.groups.get("g_orders")  # a group outlives its tables while they are recoverable
    now[0] += timedelta(hours=2)
    purged = cat.tables.purge_dropped()
    assert sorted(t.name for t in purged) == ["li", "orders"]
    with pytest.raises(NotFound):
        cat.groups.get("g_orders")  # went with its last table
    with pytest.raises(NotFound, match="no dropped table"):
        cat.tables.recover("orders")
    cat.dispose()


def test_recover_refused_when_name_is_taken(catalog, backends):
    create_orders(catalog)
    catalog.tables.drop("orders")
    create_orders(catalog, colocate_with=None)
    with pytest.raises(AlreadyExists, match="a new table of that name exists"):
        catalog.tables.recover("orders")


def test_force_drop_purges_now(catalog, backends):
    create_orders(catalog)
    catalog.tables.drop("orders", force=True)
    assert catalog.tables.list(include_dropped=True) == []
    with pytest.raises(NotFound):
        catalog.groups.get("g_orders")


def test_global_group_spans_databases(catalog, backends):
    a = catalog.tables.create("db1.orders", ORDERS, ["o_orderkey"], bucket_num=4, replication_num=1, colocate_with="__global__orders")
    b = catalog.tables.create("db2.orders", ORDERS, ["o_orderkey"], bucket_num=4, replication_num=1, colocate_with="__global__orders")
    g = catalog.groups.get("__global__orders")
    assert g.db_id == 0 and g.full_name == "__global__orders" and g.table_ids == (a.id, b.id)
    # a plain group name is per database
    c = catalog.tables.create("db1.x", ORDERS, ["o_orderkey"], bucket_num=4, replication_num=1, colocate_with="g")
    d = catalog.tables.create("db2.x", ORDERS, ["o_orderkey"], bucket_num=8, replication_num=1, colocate_with="g")
    assert c.group_id != d.group_id


@pytest.mark.parametrize("buckets", [0, -1, 65537, 2.5, True])
def test_bad_bucket_counts(catalog, backends, buckets):
    before = snapshot(catalog)
    with pytest.raises(InvalidArgument, match="invalid bucket count"):
        create_orders(catalog, bucket_num=buckets)
    assert snapshot(catalog) == before


def test_more_replicas_than_eligible_backends(catalog, backends):
    catalog.backends.set_state("be3", "down")
    before = snapshot(catalog)
    with pytest.raises(PlacementError, match="replication_num 3 needs 3 alive backends on distinct hosts, but only 2"):
        create_orders(catalog, replication_num=3)
    assert snapshot(catalog) == before


def test_backends_on_one_host_count_once(catalog, tmp_path):
    for i in range(3):
        (tmp_path / f"b{i}").mkdir()
        catalog.backends.add((tmp_path / f"b{i}").as_uri(), host="node1" if i < 2 else "node2")
    with pytest.raises(PlacementError, match="only 2 are eligible"):
        create_orders(catalog, replication_num=3)
    create_orders(catalog, replication_num=2)
    hosts = {b.id: b.host for b in catalog.backends.list()}
    for ids in catalog.groups.get("g_orders").bucket_map:
        assert len({hosts[i] for i in ids}) == 2


@pytest.mark.parametrize("name", ["a/b", "../etc", "x;drop table tables", "o'rders", "t--", "", "1abc", "a.b.c", "a b"])
def test_names_with_path_or_sql_metacharacters(catalog, backends, name):
    before = snapshot(catalog)
    with pytest.raises(InvalidArgument, match="invalid"):
        catalog.tables.create(name, ORDERS, ["o_orderkey"], bucket_num=4)
    with pytest.raises(InvalidArgument, match="invalid"):
        catalog.tables.create("ok", ORDERS, ["o_orderkey"], bucket_num=4, colocate_with=name or "a/b")
    assert snapshot(catalog) == before


def test_unknown_things_are_named(catalog, backends):
    with pytest.raises(NotFound, match="unknown colocation group 'nope'"):
        catalog.groups.get("nope")
    with pytest.raises(NotFound, match="unknown table default.nope"):
        catalog.tables.get("nope")
    with pytest.raises(NotFound, match="unknown backend 'be9': known backends are be1"):
        catalog.backends.get("be9")
    with pytest.raises(NotFound):
        catalog.partitions.add("nope", "2026-11-01")
    with pytest.raises(InvalidArgument, match="'o_nokey' is not a column"):
        catalog.tables.create("t", ORDERS, ["o_nokey"], bucket_num=4)


def test_column_and_type_validation(catalog, backends):
    with pytest.raises(InvalidArgument, match="unsupported column type 'bigintt'"):
        catalog.tables.create("t", [("a", "bigintt")], ["a"], bucket_num=4)
    with pytest.raises(InvalidArgument, match="duplicate column"):
        catalog.tables.create("t", [("a", "int"), ("A", "int")], ["a"], bucket_num=4)
    with pytest.raises(InvalidArgument, match="both a distribution and a partition column"):
        catalog.tables.create("t", [("a", "int")], ["a"], partition_cols=["a"], bucket_num=4)
    with pytest.raises(AlreadyExists):
        catalog.tables.create("t", [("a", "int")], ["a"], bucket_num=4)
        catalog.tables.create("t", [("a", "int")], ["a"], bucket_num=4)


def test_backend_validation(catalog, tmp_path):
    b = catalog.backends.add((tmp_path / "be1").as_uri(), name="be1", capacity_bytes=10**12)
    assert b.host == "be1" and b.state == "alive"
    before = snapshot(catalog)
    cases = [
        ((tmp_path / "be1").as_uri(), AlreadyExists, "is already backend be1"),
        ((tmp_path / "be1").as_uri() + "/", AlreadyExists, "is already backend be1"),
        ((tmp_path / "be1" / "sub").as_uri(), AlreadyExists, "overlaps backend be1"),
        (tmp_path.as_uri(), AlreadyExists, "overlaps"),
        ("ftp://x/y", InvalidArgument, "scheme must be one of"),
        ("file://relative/path", InvalidArgument, "absolute path"),
        ("/no/scheme", InvalidArgument, "scheme must be one of"),
        ("file:///data/../etc", InvalidArgument, "no '..'"),
        ("s3a://", InvalidArgument, "needs a bucket"),
    ]
    for root, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            catalog.backends.add(root)
    with pytest.raises(InvalidArgument):
        catalog.backends.add((tmp_path / "be2").as_uri(), name="be 2")
    with pytest.raises(InvalidArgument, match="invalid capacity"):
        catalog.backends.add((tmp_path / "be2").as_uri(), capacity_bytes=0)
    assert snapshot(catalog) == before


def test_remove_backend_in_use_is_refused(catalog, backends):
    create_orders(catalog)
    with pytest.raises(Conflict, match="decommission"):
        catalog.backends.remove("be1")
    assert catalog.backends.decommission("be1").state == "decommissioning"
    with pytest.raises(Conflict, match="does not come back"):
        catalog.backends.set_state("be1", "alive")
    catalog.backends.add("s3a://spare-bucket/root", name="spare")
    catalog.backends.remove("spare")
    assert [b.name for b in catalog.backends.list()] == ["be1", "be2", "be3"]


def test_flags_and_events(catalog, backends):
    assert catalog.flags() == {"disable_colocate_balance": False, "disable_colocate_relocate": False,
                               "disable_colocate_join": False}
    catalog.set_flag("disable_colocate_join", True)
    assert catalog.flags()["disable_colocate_join"] is True
    with pytest.raises(InvalidArgument, match="unknown flag"):
        catalog.set_flag("disable_everything", True)
    create_orders(catalog)
    kinds = [e.kind for e in catalog.events()]
    assert kinds[:3] == ["table.create", "group.create", "flag.set"]
    assert all(e.actor == "pytest" for e in catalog.events())


def test_manual_stability_override(catalog, backends):
    create_orders(catalog)
    g = catalog.groups.set_stable("g_orders", False, reason="maintenance")
    assert not g.stable and g.unstable_reason == "maintenance"
    assert catalog.groups.set_stable(g.group_id, True).stable
