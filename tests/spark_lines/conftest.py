"""The matrix entries' fixture, shared by the test_line_matrix*.py files."""

from __future__ import annotations

import pytest

from line_matrix import DOCTOR_LINE, S3_LINES, Entry, run_entry


@pytest.fixture(scope="module")
def line_entry(airflow_db, tmp_path_factory):
    """``line_entry("4.3")``: that line's entry, run the first time a test of this file asks for it.
    Why per file and on demand: the entry test, doctor's check and the cross-line test read the same
    run, and a line no test of this run asks for costs nothing. A failed or skipped run is not
    repeated: every test that asks for it fails or skips the same way."""
    done: dict[str, Entry | BaseException] = {}
    servers = []  # the S3 server of the S3_LINES entries, started for the first and kept for the file

    def s3_server():
        if not servers:
            from s3server import start_s3

            servers.append(start_s3(tmp_path_factory.mktemp("s3")))
        return servers[0]

    def get(line: str) -> Entry:
        if line not in done:
            try:
                done[line] = run_entry(line, tmp_path_factory.mktemp(f"line-{line}"), doctor=line == DOCTOR_LINE,
                                       s3=s3_server() if line in S3_LINES else None)
            except (Exception, pytest.skip.Exception, pytest.fail.Exception) as exc:
                done[line] = exc
                raise
        got = done[line]
        if isinstance(got, BaseException):
            raise got
        return got

    try:
        yield get
    finally:
        for server in servers:
            server.stop()
