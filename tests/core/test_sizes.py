from airflow_colocate.core.sizes import human_bytes


def test_human_bytes_binary_units_three_figures():
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.50 KiB"
    assert human_bytes(43204608) == "41.2 MiB"
    assert human_bytes(512 * 1024 ** 2) == "512 MiB"
    assert human_bytes(1.07 * 1024 ** 4) == "1.07 TiB"
    assert human_bytes(5 * 1024 ** 6) == "5120 PiB"
    assert human_bytes(-2048) == "-2.00 KiB"
    assert human_bytes(None) == "-"
