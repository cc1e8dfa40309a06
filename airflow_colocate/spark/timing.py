"""Where a query's fixed cost goes on the driver: a small record of named phases, each with its wall
time, this Python process's CPU time and, when the Spark JVM runs on this host, that JVM's CPU time.

Why three figures: on a shared machine the wall time of a 50 ms phase swings by several times with
the neighbours' load, while CPU time barely moves; and a phase that is cheap in Python may be
expensive in the JVM it calls (Spark's analysis and planning), which the Python figure cannot show.
The JVM figure is the whole process's (``/proc/<pid>/stat``, 10 ms ticks): outside the run phase
the driver JVM runs little else, but it is a process figure, not a thread's.

    clock = DriverClock.start(spark)
    with clock.phase("catalog"):
        ...
    print(clock.line())   # driver phases: catalog 12 ms, check 30 ms, … = 77 ms (cpu: python 40 ms, jvm 30 ms)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# Not the driver's fixed cost: the query's own work, shown apart from the total.
NOT_FIXED = ("run",)


@dataclass
class Phase:
    wall: float = 0.0
    cpu: float = 0.0  # this Python process
    jvm: float | None = None  # the Spark JVM process (None: not on this host, or not Linux)


def _jvm_stat(pid: int | None) -> str | None:
    if pid is None:
        return None
    path = f"/proc/{pid}/stat"
    return path if os.path.exists(path) else None


@dataclass
class DriverClock:
    """Named phases in the order they first ran; a phase entered twice adds up."""

    phases: dict[str, Phase] = field(default_factory=dict)
    jvm_stat: str | None = None  # /proc/<pid>/stat of the JVM, when it runs here

    @classmethod
    def start(cls, spark=None) -> DriverClock:
        """A clock; with a classic ``spark`` session whose JVM runs on this host, JVM CPU is measured too."""
        pid = None
        try:
            if spark is not None and getattr(spark, "_jvm", None) is not None:
                pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        except Exception:  # noqa: BLE001 - Spark Connect or no JVM: wall and Python CPU only
            pid = None
        return cls(jvm_stat=_jvm_stat(pid))

    def _jvm_seconds(self) -> float | None:
        if self.jvm_stat is None:
            return None
        try:
            with open(self.jvm_stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
        except (OSError, ValueError, IndexError):
            return None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        w0, c0, j0 = time.perf_counter(), time.process_time(), self._jvm_seconds()
        try:
            yield
        finally:
            j1 = self._jvm_seconds()
            p = self.phases.setdefault(name, Phase())
            p.wall += time.perf_counter() - w0
            p.cpu += time.process_time() - c0
            if j0 is not None and j1 is not None:
                p.jvm = (p.jvm or 0.0) + j1 - j0

    def fixed(self) -> Phase:
        """The driver's fixed cost: every phase but the query's own run."""
        out = Phase()
        for name, p in self.phases.items():
            if name in NOT_FIXED:
                continue
            out.wall += p.wall
            out.cpu += p.cpu
            if p.jvm is not None:
                out.jvm = (out.jvm or 0.0) + p.jvm
        return out

    def as_dict(self) -> dict[str, dict[str, float | None]]:
        return {name: {"wall": round(p.wall, 4), "cpu": round(p.cpu, 4),
                       "jvm": None if p.jvm is None else round(p.jvm, 3)} for name, p in self.phases.items()}

    def line(self) -> str:
        """``driver phases: catalog 12 ms, check 30 ms, … = 77 ms (cpu: python 40 ms, jvm 30 ms); run 900 ms``"""
        return phases_line({name: (p.wall, p.cpu, p.jvm) for name, p in self.phases.items()})


def phases_line(phases: dict[str, tuple[float, float, float | None]]) -> str:
    """One line of (wall, python cpu, jvm cpu) seconds per phase, the fixed ones summed."""
    fixed = {k: v for k, v in phases.items() if k not in NOT_FIXED}
    wall = sum(v[0] for v in fixed.values())
    cpu = sum(v[1] for v in fixed.values())
    jvms = [v[2] for v in fixed.values() if v[2] is not None]
    parts = ", ".join(f"{k} {v[0] * 1000:.0f} ms" for k, v in fixed.items())
    text = f"driver phases: {parts} = {wall * 1000:.0f} ms (cpu: python {cpu * 1000:.0f} ms"
    text += f", jvm {sum(jvms) * 1000:.0f} ms)" if jvms else ")"
    rest = [f"{k} {v[0] * 1000:.0f} ms" for k, v in phases.items() if k in NOT_FIXED]
    return text + (f"; {', '.join(rest)}" if rest else "")


__all__ = ["DriverClock", "Phase", "phases_line", "NOT_FIXED"]
