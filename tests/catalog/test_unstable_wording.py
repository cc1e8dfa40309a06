"""Issue 16 (7): a down backend's reason says whether its buckets are still readable elsewhere."""

from __future__ import annotations

from airflow_colocate.core.sqltypes import parse_columns
from colocate_testing import add_local_backends


def test_buckets_with_a_replica_elsewhere_say_so_and_lost_ones_keep_the_old_words(sqlite_catalog, tmp_path):
    cat = sqlite_catalog
    add_local_backends(cat, tmp_path / "backends", n=3)
    cat.tables.create("t2", parse_columns("id bigint"), ["id"], bucket_num=6, replication_num=2, colocate_with="g2")
    cat.tables.create("t1", parse_columns("id bigint"), ["id"], bucket_num=6, replication_num=1, colocate_with="g1")
    cat.backends.set_state("be2", "down", reason="disk")

    two = cat.health.check_group("g2")
    reason = next(r.problem for r in two.reasons if r.backend == "be2")
    assert "have a replica on be2, which is down" in reason and "not on an alive backend" not in reason, reason
    one = cat.health.check_group("g1")
    reason = next(r.problem for r in one.reasons if r.backend == "be2")
    assert reason.endswith("are not on an alive backend") and "have a replica" not in reason, reason

    cat.backends.set_state("be3", "down", reason="disk")  # now some of g2's buckets have no alive replica
    both = [r.problem for r in cat.health.check_group("g2").reasons if r.backend in ("be2", "be3")]
    assert any("have a replica on" in t and "; bucket seqs" in t and t.endswith("are not on an alive backend")
               for t in both), both
