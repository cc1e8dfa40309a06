"""The nemesis's judges can fail: each invariant, shown a lake or a read that breaks it, says so;
the model narrows, widens and collapses as the outcomes say; shrinking keeps a failing core."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nemesis_checks import check_join, check_read  # noqa: E402
from nemesis_model import Model, expired_days, rows  # noqa: E402
from nemesis_schedule import generate, shrink  # noqa: E402

KEY = ("a", "2026-10-21")


def test_read_of_the_acknowledged_write_passes_and_every_kind_of_wrong_row_fails():
    allowed = {k: {None} for k in Model().live}
    allowed[KEY] = {7}
    good = sorted(rows(*KEY, 7))
    assert check_read("a", good, allowed) == []
    assert "twice" in check_read("a", good + good[:1], allowed)[0]
    assert "missing" in check_read("a", good[1:], allowed)[0]
    assert "more than one write" in check_read("a", good + sorted(rows(*KEY, 8))[:1], allowed)[0]
    assert "allows [7]" in check_read("a", sorted(rows(*KEY, 8)), allowed)[0]
    assert any("allows [None]" in v for v in check_read("a", good + sorted(rows("a", "2026-10-22", 3)), allowed))
    assert any("never wrote" in v for v in check_read("a", good + [(1, "a:2030-01-01:1:1", "2030-01-01")], allowed))


def test_join_must_equal_the_join_of_an_allowed_pair():
    allowed = {k: {None} for k in Model().live}
    allowed[("a", "2026-10-21")], allowed[("b", "2026-10-21")] = {1}, {2}
    ra, rb = {i: v for i, v, _ in rows("a", "2026-10-21", 1)}, {i: v for i, v, _ in rows("b", "2026-10-21", 2)}
    want = [("2026-10-21", i, ra[i], rb[i]) for i in ra.keys() & rb.keys()]
    assert want and check_join(want, allowed) == []
    assert check_join(want[1:], allowed) != []
    assert check_join(want + want[:1], allowed) != []


def test_model_outcomes():
    m = Model()
    m.apply([({"kind": "write", "table": "a", "dt": KEY[1], "wseed": 5}, "ok")])
    assert m.live[KEY] == {5}
    m.apply([({"kind": "write", "table": "a", "dt": KEY[1], "wseed": 6}, "failed")])
    assert m.live[KEY] == {5}  # a failed write changes nothing visible
    m.apply([({"kind": "write", "table": "a", "dt": KEY[1], "wseed": 6}, "killed")])
    assert m.live[KEY] == {5, 6}
    assert m.observe(KEY, 4) is not None and m.observe(KEY, 6) is None and m.live[KEY] == {6}
    m.apply([({"kind": "drop", "table": "a", "dt": KEY[1]}, "ok")])
    assert m.live[KEY] == {None}
    m.apply([({"kind": "recover", "table": "a", "dt": KEY[1]}, "ok")])
    assert m.live[KEY] == {5, 6}  # one of its past writes; the next look says which
    m.apply([({"kind": "expire"}, "ok")])
    assert all(m.live[("b", d)] == {None} for d in expired_days()) and expired_days()


def test_schedules_replay_from_their_seed_and_shrink_to_the_failing_core():
    assert generate(3, 8) == generate(3, 8) != generate(4, 8)
    big = generate(3, 16)
    culprit = big["steps"][11]
    small = shrink(big, lambda s: culprit in s["steps"])
    assert small["steps"] == [culprit]
    pair = (big["steps"][2], big["steps"][13])
    assert shrink(big, lambda s: all(p in s["steps"] for p in pair))["steps"] == list(pair)
