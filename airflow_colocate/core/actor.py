"""Who changed the catalog, as the event log records it (``events.actor``, at most 128 chars).

One change names one actor, and only the event's actor column names it (a reason is the reason):
the Airflow user in the UI and API (``airflow:<user>``), the OS user, ``$COLOCATE_ACTOR`` or
``colocate --actor`` in the CLI, and the task from Airflow tasks.

A change made by an Airflow task names the task: ``airflow:<dag_id>/<task_id>/<run_id>``, so the
Colocation page can say "DAG x · task y · run z" and link to that task instance, and an operator
reading ``colocate events`` sees which run moved a bucket. DAG and task ids cannot hold a ``/``;
the run id comes last, so one that does still parses.
"""

from __future__ import annotations

PREFIX = "airflow:"
MAX_LEN = 128


def task_actor(dag_id: str, task_id: str, run_id: str) -> str:
    """The actor for a change made by one task instance (cut to the column's 128 characters)."""
    return f"{PREFIX}{dag_id}/{task_id}/{run_id}"[:MAX_LEN]


def check_actor(text: str) -> str:
    """An actor given by a person (``colocate --actor``): one printable line of at most 128
    characters, stripped. Refused with what would be right; returns it."""
    from airflow_colocate.core.validate import actor

    return actor(text)


def parse_task_actor(actor: str | None) -> dict[str, str] | None:
    """``{"dag_id", "task_id", "run_id"}`` of an actor written by :func:`task_actor`, else None."""
    if not actor or not actor.startswith(PREFIX):
        return None
    parts = actor[len(PREFIX):].split("/", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return dict(zip(("dag_id", "task_id", "run_id"), parts))


__all__ = ["check_actor", "parse_task_actor", "task_actor"]
