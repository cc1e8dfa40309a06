"""A whole balance run as every entry starts it (``colocate balance``, ``ColocateBalanceOperator``,
the maintenance DAG): probe, plan or run, say what it did, count it. The entries parse their
arguments and render what these return; the sequence lives here once, so a dry run from the
command line and from a task plan, warn and summarise alike."""

from __future__ import annotations

from collections.abc import Callable

from airflow_colocate.jobs import metrics
from airflow_colocate.jobs.balance import Balancer, BalanceOptions, Runner, describe_plans, plan, summary_json
from airflow_colocate.jobs.balance_outcome import DAG_HINT, outcome_line, pending_line
from airflow_colocate.jobs.health import probe_backends, probe_line, waiting_to_relocate

Echo = Callable[[str], None]


def _quiet(line: str) -> None:
    pass


def backend_names(catalog) -> dict[int, str]:
    return {b.id: b.name for b in catalog.backends.list()}


def prepare(catalog, options: BalanceOptions, *, probe: bool, info: Echo = _quiet, warn: Echo = _quiet) -> None:
    """Record every backend's heartbeat before planning (``probe``), and say which backends wait
    for their relocate delay (a repair that waits would otherwise look as if it did nothing)."""
    if probe:
        results = probe_backends(catalog, relocate_delay=options.delay)
        healthy = all(r.ok and r.backend.state == "alive" for r in results)  # a backend held down warns too
        (info if healthy else warn)(probe_line(results))
    for line in waiting_to_relocate(catalog.health.backends(relocate_delay=options.delay),
                                    options.delay, catalog.now(), options.relocate_delay_source):
        warn(line)


def dry_run(catalog, options: BalanceOptions, *, hint: str = DAG_HINT) -> dict:
    """What a run would do now, changing nothing (the probe's verdicts included): the plans, their
    moves with backend names, the relocations that wait for their delay and the line that says so."""
    plans = plan(catalog, options)
    names = backend_names(catalog)
    pending = Balancer(catalog, None, options).pending()
    return {"dry_run": True, "plans": [p.summary() for p in plans], "pending": [p.to_dict() for p in pending],
            "relocate_now": options.relocate_now, "lines": describe_plans(plans, names),
            "moves": [[p.full_name, mv.bucket_seq, names.get(mv.src, mv.src), names.get(mv.dst, mv.dst), mv.bytes,
                       mv.why] for p in plans for mv in p.moves],
            "outcome": f"dry run: {pending_line(pending, catalog.now(), hint)}" if pending else None}


def run(catalog, runner: Runner, options: BalanceOptions, *, work_dir: str | None = None, echo: Echo = _quiet,
        hint: str = DAG_HINT) -> dict:
    """One balance run (:meth:`Balancer.run`) as plain JSON, with the one line that says what it
    did (``outcome``) and the unstable-group gauge. Each job's plan is echoed before it runs."""
    summary = Balancer(catalog, runner, options, work_dir=work_dir, echo=echo, backend_names=backend_names(catalog)).run()
    out = summary_json(summary)
    metrics.gauge("balance.unstable_groups", sum(1 for g in out["groups"] if not g["stable"]))
    out["outcome"] = outcome_line(out, catalog.now(), hint)
    return out


def skipped(out: dict) -> bool:
    """A run that moved nothing because a relocation waits for its delay: not a green run."""
    return out["outcome"].startswith("nothing moved: ")


__all__ = ["backend_names", "dry_run", "prepare", "run", "skipped"]
