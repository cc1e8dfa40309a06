"""operators.log_summary: the per-bucket table and phase line of a task log's summary (pure)."""

from __future__ import annotations

from airflow_colocate.operators.log_summary import MAX_BUCKET_ROWS, Phases, bucket_table, write_lines

NAMES = {1: "be1", 2: "be2", 3: "be3"}


def replicas(n: int) -> list[dict]:
    return [{"bucket": b, "backend": 1 + (b + k) % 3, "rows": 100 + b, "bytes": 1024 * (b + 1)}
            for b in range(n) for k in range(2)]


def test_small_write_lists_every_bucket_with_rows_size_and_backends():
    lines = write_lines({"table": "default.t", "partition": "2026-11-01", "version": 3, "mode": "append",
                         "rows": 403, "bytes": 20480, "replicas": 8, "buckets": replicas(4)}, NAMES)
    assert lines[0] == ("committed default.t partition 2026-11-01 version 3 (append): 403 rows, 20.0 KiB "
                        "in 8 replicas of 4 buckets")
    assert lines[1].split() == ["bucket", "rows", "size", "backends"]
    assert lines[2].split(None, 2) == ["0", "100", "1.00 KiB  be1, be2"]
    assert lines[5].split(None, 2) == ["3", "103", "4.00 KiB  be1, be2"]
    assert len(lines) == 6


def test_many_buckets_show_the_spread_and_the_largest():
    lines = bucket_table(replicas(512), NAMES)
    assert lines[0] == ("512 buckets: rows min 100 / median 355 / max 611; "
                        "size min 1.00 KiB / median 256 KiB / max 512 KiB")
    shown = [int(line.split()[0]) for line in lines[3:]]
    assert shown == list(range(512 - MAX_BUCKET_ROWS, 512))  # the largest, in bucket order


def test_unknown_backend_is_named_by_id():
    assert bucket_table([{"bucket": 0, "backend": 9, "rows": 1, "bytes": 5}], NAMES)[1].endswith("backend 9")


def test_phases_add_up_in_the_order_they_ran():
    phases = Phases()
    for name in ("plan", "spark job", "commit", "plan"):
        with phases(name):
            pass
    assert list(phases.seconds) == ["plan", "spark job", "commit"]
    assert phases.line().startswith("elapsed: plan 0.0s, spark job 0.0s, commit 0.0s (total ")
