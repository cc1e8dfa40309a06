"""Value types of ``colocate`` options and arguments.

Their refusals read as they did when the command was built on argparse (``invalid int value: 'x'``,
``invalid choice: 'weight' (choose from 'count', 'size')``): scripts and people already know them,
and they say what would be right. Capacities and booleans are parsed inside the commands and
refused as catalog errors (``invalid capacity ...``), as they always were. Every number is then
checked by :mod:`airflow_colocate.core.validate` (finite, in the option's range, an id within 64
bits), so ``nan``, ``inf``, a negative duration or a 24-digit id is a refusal, never a crash.
"""

from __future__ import annotations

import re
from datetime import timedelta

import click

from airflow_colocate.core import validate
from airflow_colocate.core.errors import InvalidArgument


class Int(click.ParamType):
    """An integer in ``[minimum, maximum]``; by default anything a 64-bit column holds."""

    name = "integer"

    def __init__(self, minimum: int | None = -validate.MAX_ID - 1, maximum: int = validate.MAX_ID, what: str = "value"):
        self.minimum, self.maximum, self.what = minimum, maximum, what

    def convert(self, value, param, ctx):
        try:
            number = value if isinstance(value, int) else int(value)
        except ValueError:
            self.fail(f"invalid int value: {validate.shown(value)}", param, ctx)
        try:
            return validate.integer(number, self.what, minimum=self.minimum, maximum=self.maximum)
        except InvalidArgument as exc:
            self.fail(str(exc).replace("invalid value ", "", 1), param, ctx)


class Float(click.ParamType):
    """A finite number in ``[minimum, maximum]`` (``nan`` and ``inf`` are refused)."""

    name = "float"

    def __init__(self, minimum: float | None = None, maximum: float | None = None):
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value, param, ctx):
        try:
            number = value if isinstance(value, float) else float(value)
        except ValueError:
            self.fail(f"invalid float value: {validate.shown(value)}", param, ctx)
        try:
            return validate.number(number, "value", minimum=self.minimum, maximum=self.maximum)
        except InvalidArgument as exc:
            self.fail(str(exc).replace("invalid value ", "", 1), param, ctx)


class Text(click.ParamType):
    """Free text a person types (``--reason``): one printable line, at most ``max_len`` characters."""

    name = "text"

    def __init__(self, what: str, max_len: int):
        self.what, self.max_len = what, max_len

    def convert(self, value, param, ctx):
        try:
            return validate.free_text(value, self.what, max_len=self.max_len)
        except InvalidArgument as exc:
            self.fail(str(exc), param, ctx)


class Uri(click.ParamType):
    """A root or source URI or path: not empty (an unset variable), printable, one line."""

    name = "uri"

    def convert(self, value, param, ctx):
        try:
            return validate.uri(value, (param.name or "URI") if param is not None else "URI")
        except InvalidArgument as exc:
            self.fail(str(exc), param, ctx)


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
        try:
            return validate.actor(value)
        except InvalidArgument as exc:
            self.fail(str(exc), param, ctx)


class Master(click.ParamType):
    """``--master``: a Spark master URL, checked for its form before a JVM is asked to parse it
    (``local``, ``local[4]``, ``local[*,2]``, ``local-cluster[2,1,1024]``, ``yarn``, or a URL
    such as ``spark://host:7077`` or ``k8s://https://host``)."""

    name = "url"
    FORM = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]|yarn"
                      r"|[a-z][a-z0-9+.-]*://\S+")

    def convert(self, value, param, ctx):
        try:
            text = validate.free_text(value, "master", max_len=validate.MAX_URI)
        except InvalidArgument as exc:
            self.fail(str(exc), param, ctx)
        if not self.FORM.fullmatch(text or ""):
            self.fail(f"invalid Spark master {validate.shown(value)}: expected local, local[N], local[*], "
                      f"local[N,F], yarn or a URL such as spark://host:7077", param, ctx)
        return text


INT = Int()  # buckets, replication: their own checks say what is wrong with 0 or -1
COUNT = Int(minimum=0)  # --limit, --sample
DAYS = Int(minimum=0, maximum=366 * 100, what="retention")  # --retention-days: 0 keeps all, a century at most
ID = Int(minimum=1)  # a job id
FLOAT = Float()
FRACTION = Float(minimum=0.0)  # --threshold: a fraction of the average, 0 = none
HOURS = Float(minimum=0.0, maximum=validate.MAX_HOURS)
MINUTES = Float(minimum=0.0, maximum=validate.MAX_HOURS * 60)
SECONDS = Float(minimum=0.001, maximum=validate.MAX_HOURS * 3600)  # a timeout: 0 or less is no time at all
ACTOR = Actor()
REASON = Text("reason", validate.MAX_REASON)
URI = Uri()
MASTER = Master()


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
    out = int(float(match.group(1)) * 1024 ** " kmgtp".index(match.group(2) or " "))
    if not 0 < out <= validate.MAX_ID:  # 0.0000001 rounds to 0; the catalog's column holds 63 bits
        raise InvalidArgument(f"invalid capacity {validate.shown(text)}: expected a positive size of at most 8E "
                              f"such as 1048576, 500G or 2T")
    return out


def names(text: str | None) -> list[str]:
    """``'a, b'`` -> ``['a', 'b']`` (column lists)."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def relocate_delay(minutes: float | None) -> timedelta:
    """``--relocate-delay-minutes``, or ``$COLOCATE_RELOCATE_DELAY_MINUTES`` (default 30) when not given."""
    from airflow_colocate.jobs.health import relocate_delay_from_env

    return relocate_delay_from_env() if minutes is None else validate.duration(minutes, "--relocate-delay-minutes",
                                                                               unit="minutes")
