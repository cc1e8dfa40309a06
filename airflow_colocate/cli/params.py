"""Value types of ``colocate`` options and arguments.

Their refusals read as they did when the command was built on argparse (``invalid int value: 'x'``,
``invalid choice: 'weight' (choose from 'count', 'size')``): scripts and people already know them,
and they say what would be right. Capacities and booleans are parsed inside the commands and
refused as catalog errors (``invalid capacity ...``), as they always were.
"""

from __future__ import annotations

import re
from datetime import timedelta

import click

from airflow_colocate.core.errors import InvalidArgument


class Int(click.ParamType):
    name = "integer"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"invalid int value: {value!r}", param, ctx)


class Float(click.ParamType):
    name = "float"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        try:
            return float(value)
        except ValueError:
            self.fail(f"invalid float value: {value!r}", param, ctx)


class Choice(click.Choice):
    """Exact, case-sensitive choices, listed in the refusal."""

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        self.fail(f"invalid choice: {value!r} (choose from {', '.join(map(repr, self.choices))})", param, ctx)


class Actor(click.ParamType):
    """``--actor``: who the event log names for this command's changes."""

    name = "name"

    def convert(self, value, param, ctx):
        from airflow_colocate.core.actor import check_actor

        try:
            return check_actor(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


INT = Int()
FLOAT = Float()
ACTOR = Actor()


def boolean(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise InvalidArgument(f"invalid boolean {text!r}: expected true or false")


def size(text: str | None) -> int | None:
    """``500G`` / ``2TiB`` / ``1048576`` -> bytes."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise InvalidArgument(f"invalid capacity {text!r}: expected a positive size such as 1048576, 500G or 2T")
    return int(float(match.group(1)) * 1024 ** " kmgtp".index(match.group(2) or " "))


def names(text: str | None) -> list[str]:
    """``'a, b'`` -> ``['a', 'b']`` (column lists)."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def relocate_delay(minutes: float | None) -> timedelta:
    """``--relocate-delay-minutes``, or ``$COLOCATE_RELOCATE_DELAY_MINUTES`` (default 30) when not given."""
    from airflow_colocate.jobs.health import relocate_delay_from_env

    return relocate_delay_from_env() if minutes is None else timedelta(minutes=minutes)
