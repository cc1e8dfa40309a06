"""Why a table is read without its bucket spec, or a join shuffles: one vocabulary with one sentence
and one metric tag per reason.

A reason travels as text (the plan, the report, the explain, the API), so the sentence is the
stable prefix and any detail follows after ``": "``; :meth:`Fallback.of` reads the kind back from
such a text, which is how a metric gets a bounded tag from a reason that names tables and backends.
"""

from __future__ import annotations

from enum import Enum

from airflow_colocate.core.errors import InvalidArgument


class Fallback(Enum):
    """The kinds of fallback, each with the sentence people read and the tag metrics carry."""

    NOT_STABLE = ("group is not stable", "group_not_stable")
    NOT_SAME_GROUP = ("tables are not in the same group", "not_same_group")
    NOT_COVERED = ("join keys do not cover the distribution columns", "keys_not_covered")
    DISABLED = ("colocate join is disabled", "disabled")
    NOT_COLOCATED = ("table is not colocated", "table_not_colocated")

    def __init__(self, sentence: str, tag: str) -> None:
        self.sentence = sentence
        self.tag = tag

    def because(self, detail: str | None = None) -> str:
        """The reason as text: the sentence, then the detail that names what is wrong."""
        return f"{self.sentence}: {detail}" if detail else self.sentence

    @classmethod
    def of(cls, reason: str | None) -> Fallback | None:
        """The kind of a reason text (its sentence is its prefix); None for no reason or another text."""
        for kind in cls:
            if (reason or "").startswith(kind.sentence):
                return kind
        return None


class JoinPolicy(Enum):
    """When a group's joins may stay bucketed. ``stable`` is the seeds' (Doris's) rule: only while the
    group is stable. ``readable`` keeps the bucket join while the group is unstable as long as every
    bucket of every table a query reads has a verified replica on an alive backend: a bucket join
    needs each bucket's rows of every table at the committed version, from any good replica; only
    locality is lost (a bucket read from another backend than its map names is read remotely)."""

    STABLE = "stable"
    READABLE = "readable"

    @classmethod
    def parse(cls, value: str | JoinPolicy | None) -> JoinPolicy:
        if isinstance(value, JoinPolicy):
            return value
        try:
            return cls(str(value or "stable").strip().lower())
        except ValueError:
            raise InvalidArgument(f"invalid join policy {value!r}: expected 'stable' (joins shuffle while the group is "
                             f"unstable, the default) or 'readable' (joins stay bucketed while every bucket has a "
                             f"verified replica on an alive backend)") from None


def tag_of(reason: str | None) -> str:
    """A reason as one of a few values (a metric's tags must not explode a time series database)."""
    kind = Fallback.of(reason)
    return kind.tag if kind else "other"


__all__ = ["Fallback", "JoinPolicy", "tag_of"]
