"""Why a table is read without its bucket spec, or a join shuffles: one vocabulary with one sentence
and one metric tag per reason.

A reason travels as text (the plan, the report, the explain, the API), so the sentence is the
stable prefix and any detail follows after ``": "``; :meth:`Fallback.of` reads the kind back from
such a text, which is how a metric gets a bounded tag from a reason that names tables and backends.
"""

from __future__ import annotations

from enum import Enum


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


def tag_of(reason: str | None) -> str:
    """A reason as one of a few values (a metric's tags must not explode a time series database)."""
    kind = Fallback.of(reason)
    return kind.tag if kind else "other"


__all__ = ["Fallback", "tag_of"]
