"""What ``colocate`` prints: every listing is an aligned table for a person or JSON for a script.

Commands return what they found (a message line, a :class:`Table`, or a :class:`Report` of several
blocks) and never print it themselves, so ``--json`` means the same thing in every command and a
table looks the same everywhere. The table mimics the seeds' ``SHOW PROC`` output, so an operator
who knows Doris reads it at once; the JSON is a list of objects keyed by the same column names, so a
script never parses the table.

A table's rows hold typed values (booleans, integers, lists, None, datetimes, dicts), never text
made for people: :func:`cell` alone turns a value into what a person reads (``true``, ``1, 2``, an
empty cell) and :func:`jsonable` into what a script reads (``true``, ``[1, 2]``, ``null``), so the
two can never say different things. The fields of every listing are in docs/cli-json.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from datetime import datetime

import click

JSON_KEY = "colocate.json"  # ctx.meta: the command was asked for --json


@dataclass(frozen=True)
class Table:
    """Rows of typed values under named columns; ``title`` is printed above the table (never in the JSON)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[object]]
    title: str | None = None

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, (jsonable(v) for v in row))) for row in self.rows]


@dataclass(frozen=True)
class Fields:
    """A heading and aligned ``name: value`` lines (a table's settings above its partitions)."""

    heading: str
    pairs: Sequence[tuple[str, object]]


@dataclass(frozen=True)
class Bullets:
    """Reasons or notes under an optional heading, one ``  - item`` line each."""

    items: Sequence[str]
    heading: str | None = None


Block = str | Table | Fields | Bullets


@dataclass(frozen=True)
class Report:
    """Blocks for a person, in order, and one document for a script.

    ``data`` is what ``--json`` prints; left as None it is the records of the report's only table,
    so a listing with a title or notes around it is still a plain list of objects in JSON."""

    blocks: Sequence[Block]
    data: object = None

    def document(self) -> object:
        if self.data is not None:
            return self.data
        tables = [b for b in self.blocks if isinstance(b, Table)]
        if len(tables) != 1:  # a programming error: a report of several tables must say what its JSON is
            raise ValueError(f"a report with {len(tables)} tables needs explicit JSON data")
        return tables[0].records()


Result = None | str | Table | Report


def json_option(fn: Callable) -> Callable:
    """``--json`` on a listing command; the command never sees it, :func:`render` does."""
    return click.option("--json", "as_json", is_flag=True, help="Print typed JSON instead of a table (fields: docs/cli-json.md).")(fn)


def wants_json() -> bool:
    """Whether the running command was asked for ``--json`` (for output that streams while it runs)."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(JSON_KEY))


# Where what a command prints goes (None: the current stdout). While a command runs, the stdout of
# everything else in the process (Airflow's and py4j's log lines) is stderr, so that
# ``colocate … --json | jq`` reads one JSON document: see cli/base.py's Command.invoke.
OUT = None


def _echo(line: str) -> None:
    click.echo(line, file=OUT)


def progress() -> Callable[[str], None]:
    """A printer for lines that report progress as a long command runs: silent under ``--json``,
    where stdout must hold one JSON document and nothing else."""
    if wants_json():
        return lambda line: None
    return _echo


def render(result: Result, *, as_json: bool = False) -> None:
    """Print what a command returned."""
    if result is None:
        return
    if isinstance(result, str):
        _echo(result)
        return
    report = result if isinstance(result, Report) else Report([result])
    if as_json:
        _echo(json.dumps(jsonable(report.document()), indent=2, default=str))
        return
    for block in report.blocks:
        for line in text(block):
            _echo(line)


def text(block: Block) -> list[str]:
    """The lines a person sees for one block."""
    if isinstance(block, str):
        return [block]
    if isinstance(block, Fields):
        return [block.heading] + [f"  {name + ':':<17}{value}" for name, value in block.pairs]
    if isinstance(block, Bullets):
        return ([block.heading] if block.heading else []) + [f"  - {item}" for item in block.items]
    return table_lines(block)


def table_lines(table: Table) -> list[str]:
    """An aligned ``+---+`` table and its row count, as the seeds' ``SHOW PROC`` prints."""
    cells = [[str(c) for c in table.columns]] + [[cell(v) for v in row] for row in table.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(table.columns))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(r: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"

    n = len(table.rows)
    return ([table.title] if table.title else []) + [rule, line(cells[0]), rule, *map(line, cells[1:]), rule,
                                                     f"{n} row{'s' if n != 1 else ''} in set"]


def cell(value) -> str:
    """One table cell as a person reads it: empty for None, ``true``/``false``, a list as
    ``1, 2``, a time to the second, a dict as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, dict):
        return json.dumps(jsonable(value), default=str)
    text = str(value)
    if text.isprintable():
        return text
    # a value stored before its input was checked (a reason with a newline or a terminal escape)
    # is shown escaped: it neither breaks the table nor reaches the terminal
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def plural(n: int, word: str) -> str:
    """``1 problem``, ``3 problems``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def timestamp(value: datetime) -> str:
    """ISO 8601 to the second, with the offset when the time has one: the same text in a table and in JSON."""
    return value.isoformat(timespec="seconds")


def jsonable(value):
    """Dataclasses, tuples and datetimes as JSON-ready values (datetimes in ISO 8601, to the second)."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return timestamp(value)
    return value
