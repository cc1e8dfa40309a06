"""The cyclic collector is paused only inside a bulk transaction, and always left as it was found."""

import gc
import os

import pytest
from sqlalchemy import text


def _collector_on(s) -> bool:
    s.execute(text("SELECT 1"))
    return gc.isenabled()


def test_only_bulk_transactions_pause_the_collector(sqlite_catalog):
    assert gc.isenabled()
    assert sqlite_catalog.tx(_collector_on) is True  # a web server's ordinary transaction
    assert sqlite_catalog.tx(_collector_on, bulk=True) is False
    assert gc.isenabled()


def test_a_failing_bulk_transaction_gives_the_collector_back(sqlite_catalog):
    def boom(s):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        sqlite_catalog.tx(boom, bulk=True)
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off(sqlite_catalog):
    gc.disable()
    try:
        assert sqlite_catalog.tx(_collector_on, bulk=True) is False
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_child_forked_inside_a_bulk_transaction_has_its_collector_on(sqlite_catalog):
    def fork_inside(s):
        pid = os.fork()
        if pid == 0:  # the child: exit code 0 only if its collector runs
            os._exit(0 if gc.isenabled() else 3)
        return os.waitpid(pid, 0)[1]

    assert os.waitstatus_to_exitcode(sqlite_catalog.tx(fork_inside, bulk=True)) == 0
    assert gc.isenabled()
