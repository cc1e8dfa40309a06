"""Bring a catalog database to the newest schema with the package's Alembic migrations."""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


_REVISION = re.compile(r"^(down_)?revision\s*=\s*['\"]([^'\"]*)['\"]", re.MULTILINE)


@functools.cache
def head_revision() -> str:
    """The newest migration. Every command checks it, so it is read from the migration files'
    ``revision`` lines (Alembic loads every script, a tenth of a second per command); anything
    unusual (a merge, a branch) is left to Alembic."""
    revisions, parents = set(), set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        for down, value in _REVISION.findall(path.read_text()):
            (parents if down else revisions).add(value)
    heads = revisions - parents
    if len(heads) == 1:
        return heads.pop()
    return ScriptDirectory.from_config(_config()).get_current_head()


@contextlib.contextmanager
def _quiet():
    """Alembic's "Context impl SQLiteImpl." / "Will assume non-transactional DDL." (INFO) opened
    every task's log: reading the revision says nothing worth a line."""
    logger = logging.getLogger("alembic.runtime.migration")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn, _quiet():
        return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine) -> None:
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
