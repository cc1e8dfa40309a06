"""Spark's errors as one line a person can act on.

A Py4J or PySpark error is a Java stack trace wrapped around a Python one; the operator raises one
line from the job (``<report_uri>.error``), so the jobs keep the line that names what went wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from airflow_colocate.core.errors import ColocateError


def is_spark_error(exc: BaseException) -> bool:
    """Raised by Spark (the JVM or an executor), not by this package's own checks."""
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, PySparkException) or type(exc).__module__.startswith("py4j")


def first_line(exc: BaseException) -> str:
    """The first line of the message that is not a Java stack frame (or the error's type)."""
    for line in str(exc).strip().splitlines():
        if line.strip() and not line.startswith("\tat "):
            return line.strip()[:2000]
    return type(exc).__name__


def executor_error(exc: BaseException) -> str:
    """The message of the error an executor raised (the last ``…Error: message`` line): a failed
    task's Python exception is buried under the driver's ``An error occurred while calling …``."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        m = re.match(r"^[\w.]*(?:Error|Exception|Mismatch|NotFound|Conflict)\w*: (.+)$", line)
        if m and not line.startswith(("org.apache", "py4j", "java.")):
            return m.group(1)
    return jvm_error(exc) or first_line(exc)


def jvm_error(exc: BaseException) -> str | None:
    """A JVM failure as Spark's own message and its root cause (Py4J puts both under ``An error
    occurred while calling oNN.parquet.``), e.g. ``[FAILED_READ_FILE.NO_HINT] Encountered error
    while reading file …parquet: could not verify page integrity, CRC checksum verification failed``."""
    text = str(exc)
    head = re.search(r"^: [\w.$]+: (.+)$", text, re.M)
    if head is None:
        return None
    message = re.sub(r"\s*SQLSTATE: \w+\s*$", "", head.group(1).strip())
    causes = re.findall(r"^Caused by: [\w.$]+: (.+)$", text, re.M)
    root = re.sub(r"\s*SQLSTATE: \w+\s*$", "", causes[-1].strip()) if causes else ""
    if root and root not in message:
        message = f"{message.rstrip('. ')}: {root}"
    return message[:2000]


@contextmanager
def one_line(prefix: str | None = None, *, executor: bool = False) -> Iterator[None]:
    """Spark's failure inside the block as one :class:`ColocateError` line (``<prefix>: <line>``),
    the executor's own message with ``executor``; the package's own errors pass unchanged, and
    anything else is a bug that keeps its traceback."""
    try:
        yield
    except ColocateError:
        raise
    except Exception as exc:
        if is_spark_error(exc):
            line = executor_error(exc) if executor else first_line(exc)
            raise ColocateError(f"{prefix}: {line}" if prefix else line) from exc
        raise
