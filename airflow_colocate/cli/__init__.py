"""The ``colocate`` command: administer backends, tables and colocation groups.

Errors print one line on stderr (what was wrong, what would be right) and exit 2; the catalog is
unchanged because every command is one catalog transaction. A command line the parser refuses is
one line too, naming the help to read. One module per command family; :mod:`.output` alone prints.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from airflow_colocate.catalog import DEFAULT_DB
from airflow_colocate.cli import backend_health  # noqa: F401 - adds probe, mark-down/up, reinit to `colocate backend`
from airflow_colocate.cli import (backends, balance, doctor, groups, iceberg, imports, maintenance, params, partitions,
                                  show, tables, verify)
from airflow_colocate.cli.base import CONTEXT, Env, Group
from airflow_colocate.cli.show import GROUP_COLUMNS, MAP_COLUMNS
from airflow_colocate.core import validate
from airflow_colocate.core.errors import ColocateError, summary

__all__ = ["GROUP_COLUMNS", "MAP_COLUMNS", "cli", "main"]


@click.group("colocate", cls=Group, context_settings=CONTEXT, help="Colocation groups for Spark data lakes.")
@click.option("--catalog", metavar="URL", help="Catalog URL (default: $COLOCATE_CATALOG_URL or sqlite under $COLOCATE_HOME).")
@click.option("--db", default=DEFAULT_DB, show_default=True, help="Database for bare table and group names.")
@click.option("--actor", type=params.ACTOR, help="Who the event log names for this command's changes "
              "(default: $COLOCATE_ACTOR, else the OS user).")
@click.option("--verbose", is_flag=True, help="After a refusal's one line, print the whole message a library gave "
              "(e.g. a JVM's) on stderr.")
@click.pass_context
def cli(ctx: click.Context, catalog: str | None, db: str, actor: str | None, verbose: bool) -> None:
    if actor is None and os.environ.get("COLOCATE_ACTOR"):  # checked like --actor, before anything is opened
        actor = validate.actor(os.environ["COLOCATE_ACTOR"], "$COLOCATE_ACTOR")
    ctx.obj = Env(catalog, db, actor, verbose=verbose)
    ctx.call_on_close(ctx.obj.close)


for command in (maintenance.init, backends.backend, tables.table, partitions.partition, show.show, groups.group,
                maintenance.flag, maintenance.gc, balance.balance, verify.verify, imports.import_, balance.jobs,
                maintenance.events, doctor.doctor, iceberg.iceberg):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``colocate`` and return its exit code: 0, 2 for a refusal or a catalog error, 1 for an
    unexpected failure, 130 when interrupted. Never raises SystemExit, so tests and DAGs call it."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with cli.make_context("colocate", args) as ctx:
            cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help
        return exc.exit_code
    except (click.UsageError, ColocateError) as exc:
        refuse(exc.message if isinstance(exc, click.UsageError) else str(exc), verbose="--verbose" in args)
        return 2
    except (KeyboardInterrupt, click.Abort):
        print("colocate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # an unexpected failure still gets one line, with where to look
        text = printable(summary(exc)[0])
        print(f"colocate: internal error: {type(exc).__name__}: {text} (set COLOCATE_DEBUG=1 for a traceback)", file=sys.stderr)
        if os.environ.get("COLOCATE_DEBUG"):
            raise
        return 1
    return 0


def printable(text: str) -> str:
    """``text`` with every control character and undecodable byte escaped: a hostile value a
    message quotes never reaches the terminal raw, and always encodes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def refuse(message: str, *, verbose: bool) -> None:
    """A refusal as one stderr line; a library's multi-line message (a JVM's, pyarrow's) is
    summarised by its first line, the whole of it printed after with ``--verbose``."""
    line, cut = summary(message)
    line = printable(line)
    if cut and not verbose:
        line += " (more in 'colocate --verbose ...')"
    print(f"colocate: error: {line}", file=sys.stderr)
    if cut and verbose:
        print(message.encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
