"""A network between worker processes and the catalog's PostgreSQL, so that a fault can cut it:
the workers run in a network namespace of their own (a worker host) and reach the server over a
veth pair, as an Airflow worker reaches a shared catalog database; whoever checks the outcome stays
on 127.0.0.1 and sees the truth while the link is down (tests/nemesis, test_catalog_link_down.py).
One namespace per process (``colonem-<pid>``, veth ``cnm<pid>`` with a /30 of 10.219.0.0/16), made
once per run and removed in ``close()`` (callers run it in ``finally``), at exit, and by
:func:`sweep` for the leftovers of processes that died without it.

A cut takes one end of the veth down until :meth:`restore`: the worker's (its connected route goes:
a new connection fails at once, an open one hears nothing) or the server's (the worker's end keeps
its route but has no carrier, so every packet is lost without a word: a new connection waits for
its timeout). tc's netem is not needed (many CI kernels lack it)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess

PREFIX = "colonem-"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why no link can be made here, in one line; None when it can."""
    if os.geteuid() != 0:
        return "a link fault needs root (ip netns, veth): link faults skipped"
    if shutil.which("ip") is None:
        return "a link fault needs iproute2's ip: link faults skipped"
    return None


def sweep() -> list[str]:
    """Remove the namespaces (and with them their veths) of nemesis processes no longer alive."""
    gone = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        pid = name.removeprefix(PREFIX)
        if name.startswith(PREFIX) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _ip("netns", "del", name, check=False)
            gone.append(name)
    return gone


class CatalogLink:
    """A worker namespace and its veth to the root namespace, where PostgreSQL listens on ``hub_ip``."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.ns, self.dev = f"{PREFIX}{pid}", f"cnm{pid}"
        n = (pid % 16384) * 4
        self.hub_ip, self.worker_ip = f"10.219.{n // 256}.{n % 256 + 1}", f"10.219.{n // 256}.{n % 256 + 2}"
        self.cut_how: str | None = None

    def __enter__(self) -> "CatalogLink":
        sweep()
        self.close()  # this process's own leftover, if an earlier run of it died
        atexit.register(self.close)
        try:
            _ip("netns", "add", self.ns)
            _ip("-n", self.ns, "link", "set", "lo", "up")
            _ip("link", "add", self.dev, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
            for ns in ([], ["netns", "exec", self.ns]):  # only the addresses made here: no IPv6 link-local ones
                subprocess.run(["ip", *ns, "sh", "-c", "[ ! -d /proc/sys/net/ipv6 ] || for f in "
                                "/proc/sys/net/ipv6/conf/*/disable_ipv6; do echo 1 > $f; done"] if ns else
                               ["sh", "-c", f"[ ! -e /proc/sys/net/ipv6/conf/{self.dev}/disable_ipv6 ] || "
                                f"echo 1 > /proc/sys/net/ipv6/conf/{self.dev}/disable_ipv6"],
                               capture_output=True, timeout=30)
            _ip("addr", "add", f"{self.hub_ip}/30", "dev", self.dev)
            _ip("-n", self.ns, "addr", "add", f"{self.worker_ip}/30", "dev", "eth0")
            _ip("link", "set", self.dev, "up")
            _ip("-n", self.ns, "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Remove the namespace and the veth; idempotent, never raises."""
        _ip("netns", "del", self.ns, check=False)  # deletes its veth end, and so the peer
        if _ip("link", "show", self.dev, check=False).returncode == 0:
            _ip("link", "del", self.dev, check=False)
        self.cut_how = None

    def run_inside(self, cmd: list[str]) -> list[str]:
        """``cmd`` as a process of the worker host (ip netns exec execs it: the pid stays the same)."""
        return ["ip", "netns", "exec", self.ns, *cmd]

    def cut(self, how: str) -> None:
        """``down``: the worker's end taken down (its route goes: a connection fails at once).
        ``loss``: the server's end taken down, so the worker's end has no carrier and drops every
        packet it is given, silently: a connection waits for an answer that never comes."""
        if how == "down":
            _ip("-n", self.ns, "link", "set", "eth0", "down")
        else:
            _ip("link", "set", self.dev, "down")
        self.cut_how = how

    def restore(self) -> None:
        if self.cut_how == "down":
            _ip("-n", self.ns, "link", "set", "eth0", "up")
        elif self.cut_how == "loss":
            _ip("link", "set", self.dev, "up")
        self.cut_how = None
