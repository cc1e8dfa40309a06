"""A whole balance run as every entry starts it (``colocate balance``, ``ColocateBalanceOperator``,
the maintenance DAG): probe, plan or run, say what it did, count it. The entries parse their
arguments, call :func:`start` once and render what it returns; the sequence lives here once, so a
dry run from the command line and from a task plan, warn and summarise alike."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from airflow_colocate.jobs import metrics
from airflow_colocate.jobs.balance import Balancer, BalanceOptions, Runner, describe_plans, plan, summary_json
from airflow_colocate.jobs.balance_outcome import DAG_HINT, outcome_line, pending_line
from airflow_colocate.jobs.health import probe_backends, probe_line, waiting_to_relocate

Echo = Callable[[str], None]
RUNNERS = ("spark", "local")


def _quiet(line: str) -> None:
    pass


def start(catalog, options: BalanceOptions, *, dry_run: bool = False, runner: Runner | str = "spark",
          master: str | None = None, probe: bool = False, work_dir: str | None = None, info: Echo = _quiet,
          warn: Echo = _quiet, hint: str = DAG_HINT) -> dict:
    """One balance run, or with ``dry_run`` what it would do, changing nothing. ``runner``: a
    clone runner of the caller's (the operator's spark-submit), or ``"spark"`` (a Spark session
    this run starts on ``master``, or the one already active) or ``"local"`` (in this process).
    ``probe`` records every backend's heartbeat first (never on a dry run: it changes the catalog)."""
    for ref in options.groups or ():  # an unknown group is refused before a probe or a Spark session
        catalog.groups.get(ref)
    if probe and not dry_run:
        results = probe_backends(catalog, relocate_delay=options.delay)
        healthy = all(r.ok and r.backend.state == "alive" for r in results)  # a backend held down warns too
        (info if healthy else warn)(probe_line(results))
    names = {b.id: b.name for b in catalog.backends.list()}
    if warn is not _quiet:  # a repair that waits says so, or it looks as if it did nothing (a run's summary says it too)
        for line in waiting_to_relocate(catalog.health.backends(relocate_delay=options.delay),
                                        options.delay, catalog.now(), options.relocate_delay_source):
            warn(line)
    balancer = Balancer(catalog, None, options, work_dir=work_dir, echo=info, backend_names=names)
    if not dry_run:
        with _runner(runner, master) as clone:
            balancer.runner = clone  # started after the warnings: a Spark session takes a while
            return _run(balancer, hint)
    pending = balancer.pending()
    plans = plan(catalog, options)
    return {"dry_run": True, "plans": [p.summary() for p in plans], "pending": [p.to_dict() for p in pending],
            "relocate_now": options.relocate_now, "lines": describe_plans(plans, names),
            "headings": describe_plans(plans, names, with_moves=False),  # the moves as a table instead
            "moves": [[p.full_name, mv.bucket_seq, names.get(mv.src, mv.src), names.get(mv.dst, mv.dst), mv.bytes,
                       mv.why] for p in plans for mv in p.moves],
            "outcome": f"dry run: {pending_line(pending, catalog.now(), hint)}" if pending else None}


def _run(balancer: Balancer, hint: str) -> dict:
    """:meth:`Balancer.run` as plain JSON, with the one line that says what it did (``outcome``)
    and the unstable-group gauge. Each job's plan is echoed before it runs."""
    summary = balancer.run()
    names = balancer.backend_names
    for line in describe_plans([p for p in summary["plans"] if not p.needs_job], names):  # notes: no job ran
        balancer.echo(f"plan: {line}")
    out = summary_json(summary)
    metrics.gauge("balance.unstable_groups", sum(1 for g in out["groups"] if not g["stable"]))
    out["outcome"] = outcome_line(out, balancer.catalog.now(), hint)
    return out


@contextmanager
def _runner(runner: Runner | str, master: str | None) -> Iterator[Runner]:
    """The clone runner a run uses, and whatever it started stopped after it."""
    if runner == "local":
        from airflow_colocate.jobs.runners import local_runner

        with local_runner() as local:  # its worker processes stop with the run
            yield local
    elif runner == "spark":
        from pyspark.sql import SparkSession

        from airflow_colocate.jobs.runners import session_runner
        from airflow_colocate.spark.session import get_spark

        logging.getLogger("py4j").setLevel(logging.WARNING)  # its "Closing down clientserver connection" ended the output
        owned = SparkSession.getActiveSession() is None  # an embedding process (a test) keeps its own
        spark = get_spark("colocate-balance", master=master, conf={"spark.ui.enabled": "false"})
        try:
            if owned:
                spark.sparkContext.setLogLevel("ERROR")
            yield session_runner(spark)
        finally:
            if owned:
                spark.stop()
    else:
        yield runner


def skipped(out: dict) -> bool:
    """A run that moved nothing because a relocation waits for its delay: not a green run."""
    return out["outcome"].startswith("nothing moved: ")


__all__ = ["RUNNERS", "skipped", "start"]
