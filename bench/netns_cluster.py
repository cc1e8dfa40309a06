"""A two-host Spark standalone cluster on one machine whose hosts talk over a real, limited link.

A loopback cluster makes a shuffle free of network cost, so it cannot show what colocation saves.
Here each worker runs in a network namespace of its own, and every byte between hosts crosses veth
pairs shaped with ``tc``, joined by a bridge (the "switch") in a namespace of its own::

    root namespace   master + driver   coloN-h  10.213.N.1/29 ──┐
    coloN-w1         worker 1          eth0     10.213.N.2/29 ──┤ coloN-sw: bridge br0,
    coloN-w2         worker 2          eth0     10.213.N.3/29 ──┘ ports hub, w1, w2

Both ends of each veth pair are shaped on egress: ``tbf`` at the link's rate (``1gbit``: 1 Gbit/s,
``10gbit``: 10 Gbit/s) under ``netem delay 0.2ms`` where the kernel has netem (a kernel built without
CONFIG_NET_SCH_NETEM gets the rate only, and :attr:`Network.note` says so). So a byte from worker 1
to worker 2 crosses two shaped links, host -> switch -> host, as on a switched network. The file
system stays shared between the namespaces: scans read the lake locally on every "host", so the
link carries what Spark sends between processes (shuffle blocks, tasks, results), not remote reads.

Only addresses this module creates are used (10.213.N.0/29, IPv6 off on every device it makes), and
traffic goes to them and to loopback only. Everything is removed at exit — the cluster's processes,
then the namespaces (deleting the switch's namespace deletes every veth pair and its qdiscs) — on
failure too (try/finally and atexit). A name or an address of index N that already exists is
refused, not reused: another run holds it, or a killed one left it (``cleanup --index N``).

    with NetnsCluster(link="1gbit") as c:       # needs root, ip and tc (iproute2)
        spark = get_spark("x", c.master_url, c.spark_conf())
        before = c.network.counters(); ...; sent = c.network.sent_since(before)

    python bench/netns_cluster.py smoke [--link 10gbit]     # up, a small join both ways, down
    python bench/netns_cluster.py cleanup --index 1         # what a killed run left
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Self

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

LINKS = {"1gbit": 1_000_000_000, "10gbit": 10_000_000_000}
DELAY_MS = 0.2
PREFIX = "colo"
SUBNET = "10.213"
WORKERS = 2
CMD_TIMEOUT_S = 30


class Unavailable(RuntimeError):
    """This machine cannot build the cluster (not root, no ip/tc): callers skip with its one line."""


def unavailable() -> str | None:
    """Why the namespaced cluster cannot be built here, in one line; None when it can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the netns cluster needs root (ip netns, veth and tc): run as root"
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        return f"the netns cluster needs {' and '.join(missing)}: install iproute2"
    return None


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _namespaces() -> set[str]:
    out = _run("ip", "netns", "list", check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _links(ns: str | None = None) -> list[dict]:
    cmd = ["ip", "-j", "-s", *(["-n", ns] if ns else []), "link", "show"]
    return json.loads(_run(*cmd).stdout or "[]")


@dataclass
class Network:
    """The namespaces, veth pairs, bridge and qdiscs of cluster ``index`` (1..99)."""

    index: int = 1
    link: str = "1gbit"
    delay_ms: float = DELAY_MS
    workers: int = WORKERS
    note: str = ""  # what differs from the asked shaping (no netem in this kernel)
    made: list[str] = field(default_factory=list)  # namespaces made, for down()
    _up: bool = False

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"unknown link {self.link!r}: expected one of {', '.join(LINKS)}")
        if not 1 <= self.index <= 99:
            raise ValueError(f"index {self.index} out of range: expected 1..99 (it names 10.213.<index>.0/29)")

    # names and addresses
    @property
    def switch(self) -> str:
        return f"{PREFIX}{self.index}-sw"

    def worker_ns(self, i: int) -> str:
        return f"{PREFIX}{self.index}-w{i}"

    @property
    def root_dev(self) -> str:
        return f"{PREFIX}{self.index}-h"

    @property
    def hub_ip(self) -> str:
        return f"{SUBNET}.{self.index}.1"

    def worker_ip(self, i: int) -> str:
        return f"{SUBNET}.{self.index}.{i + 1}"

    @property
    def worker_ips(self) -> list[str]:
        return [self.worker_ip(i) for i in range(1, self.workers + 1)]

    @property
    def namespaces(self) -> list[str]:
        return [self.switch, *(self.worker_ns(i) for i in range(1, self.workers + 1))]

    def collisions(self) -> list[str]:
        """Names or addresses of this index that exist already (in use, or left by a killed run)."""
        found = [f"namespace {ns}" for ns in self.namespaces if ns in _namespaces()]
        if any(link.get("ifname") == self.root_dev for link in _links()):
            found.append(f"link {self.root_dev}")
        ours = f"{SUBNET}.{self.index}."
        for a in json.loads(_run("ip", "-j", "-4", "addr", "show").stdout or "[]"):
            for info in a.get("addr_info", []):
                if info.get("local", "").startswith(ours):
                    found.append(f"address {info['local']} on {a.get('ifname')}")
        for r in json.loads(_run("ip", "-j", "-4", "route", "show").stdout or "[]"):
            if r.get("dst", "").startswith(ours):
                found.append(f"route {r['dst']}")
        return found

    def up(self) -> None:
        clash = self.collisions()
        if clash:
            raise RuntimeError(f"netns cluster {self.index}: {', '.join(clash)} already exist: another run holds them "
                               f"or a killed one left them; remove with `python bench/netns_cluster.py cleanup "
                               f"--index {self.index}`, or pick another index")
        atexit.register(self.down)
        self._up = True
        try:
            for ns in self.namespaces:
                _run("ip", "netns", "add", ns)
                self.made.append(ns)
                # only addresses made here: no IPv6 link-local addresses on these devices
                _run("ip", "netns", "exec", ns, "sh", "-c", "[ ! -d /proc/sys/net/ipv6 ] || "
                     "{ echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; }")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.switch, "link", "set", "br0", "up")
            _run("ip", "link", "add", self.root_dev, "type", "veth", "peer", "name", "hub", "netns", self.switch)
            v6 = Path(f"/proc/sys/net/ipv6/conf/{self.root_dev}/disable_ipv6")
            if v6.exists():
                v6.write_text("1")
            _run("ip", "addr", "add", f"{self.hub_ip}/29", "dev", self.root_dev)
            ends = [(None, self.root_dev), (self.switch, "hub")]
            for i in range(1, self.workers + 1):
                ns = self.worker_ns(i)
                _run("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"w{i}", "netns", self.switch)
                _run("ip", "-n", ns, "addr", "add", f"{self.worker_ip(i)}/29", "dev", "eth0")
                ends += [(ns, "eth0"), (self.switch, f"w{i}")]
            for ns, dev in ends:
                self._shape(ns, dev)
            _run("ip", "link", "set", self.root_dev, "up")
            for i in range(1, self.workers + 1):
                _run("ip", "-n", self.worker_ns(i), "link", "set", "eth0", "up")
            for port in ["hub", *(f"w{i}" for i in range(1, self.workers + 1))]:
                _run("ip", "-n", self.switch, "link", "set", "dev", port, "master", "br0", "up")
            self._wait_reachable()
        except BaseException:
            self.down()
            raise

    def _shape(self, ns: str | None, dev: str) -> None:
        """Egress of one veth end: netem's delay (when the kernel has it) over tbf at the link rate."""
        tc = ["tc", *(["-n", ns] if ns else [])]
        rate = LINKS[self.link]
        burst = max(rate // 8 // 1000, 64 * 1024)  # 1 ms at the rate
        tbf = ["tbf", "rate", f"{rate // 1_000_000}mbit", "burst", str(burst), "latency", "50ms"]
        if not self.note:
            done = _run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{self.delay_ms}ms",
                        "limit", "100000", check=False)
            if done.returncode == 0:
                _run(*tc, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf)
                return
            self.note = (f"no delay: this kernel has no netem qdisc ({done.stderr.strip() or done.returncode}); "
                         f"links shaped to {self.link} by tbf only")
        _run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", *tbf)

    def _wait_reachable(self, timeout_s: float = 10.0) -> None:
        """Each worker namespace reaches the hub and the other workers (bridge ports take a moment)."""
        if shutil.which("ping") is None:
            return  # nothing to check with; Spark's own start-up will tell
        deadline = time.monotonic() + timeout_s
        for i in range(1, self.workers + 1):
            for ip in [self.hub_ip, *(w for w in self.worker_ips if w != self.worker_ip(i))]:
                while _run("ip", "netns", "exec", self.worker_ns(i), "ping", "-c1", "-W1", ip, check=False).returncode != 0:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"netns cluster {self.index}: {self.worker_ns(i)} cannot reach {ip} "
                                           f"after {timeout_s:.0f}s ({self.description()})")
                    time.sleep(0.2)

    def down(self) -> None:
        """Remove every namespace, veth and qdisc of this index; idempotent, never raises."""
        if not self._up:
            return
        self._up = False
        # the switch first: deleting its namespace deletes its veth ends, and so their peers
        for ns in [self.switch, *(n for n in self.namespaces if n != self.switch)]:
            if ns in _namespaces():
                _run("ip", "netns", "del", ns, check=False)
        if any(link.get("ifname") == self.root_dev for link in _links()):
            _run("ip", "link", "del", self.root_dev, check=False)
        self.made.clear()

    def leftovers(self) -> list[str]:
        """Namespaces and links of this index still present (none after down())."""
        found = [ns for ns in self.namespaces if ns in _namespaces()]
        return found + [link["ifname"] for link in _links() if link.get("ifname") == self.root_dev]

    # counters
    def counters(self) -> dict[str, int]:
        """Bytes each host has sent into the switch so far (the switch ports' rx counters): ``hub``
        (master + driver), ``w1``, ``w2``. Every byte between hosts enters the switch once."""
        ports = {link["ifname"]: link for link in _links(self.switch)}
        names = {"hub": "hub", **{f"w{i}": f"w{i}" for i in range(1, self.workers + 1)}}
        return {label: int(ports[port]["stats64"]["rx"]["bytes"]) for port, label in names.items()}

    def sent_since(self, before: dict[str, int]) -> dict[str, int]:
        now = self.counters()
        return {k: now[k] - before.get(k, 0) for k in now}

    def description(self) -> str:
        delay = self.note or f"{self.delay_ms} ms delay each way on each veth"
        return (f"netns cluster {self.index}: hub {self.hub_ip} (root namespace: master, driver), workers "
                f"{', '.join(f'{self.worker_ip(i)} ({self.worker_ns(i)})' for i in range(1, self.workers + 1))}, "
                f"bridge in {self.switch}; links {self.link}; {delay}")


class NetnsCluster:
    """The shaped network plus a Spark standalone master (root namespace, on the hub address) and
    one one-core worker in each worker namespace (tests/sparkcluster.py's start_cluster)."""

    def __init__(self, base_dir: Path | None = None, *, link: str = "1gbit", index: int = 1,
                 worker_memory: str = "1536m", delay_ms: float = DELAY_MS) -> None:
        self.network = Network(index=index, link=link, delay_ms=delay_ms)
        self.base_dir = base_dir
        self.worker_memory = worker_memory
        self.spark_cluster = None

    def __enter__(self) -> Self:
        reason = unavailable()
        if reason:
            raise Unavailable(reason)
        from sparkcluster import start_cluster

        base = self.base_dir or Path(tempfile.mkdtemp(prefix=f"netns-cluster{self.network.index}-"))
        atexit.register(self.close)
        try:
            self.network.up()
            self.spark_cluster = start_cluster(
                base, workers=self.network.workers, worker_memory=self.worker_memory,
                worker_hosts=self.network.worker_ips, master_host=self.network.hub_ip,
                worker_prefix=[["ip", "netns", "exec", self.network.worker_ns(i)]
                               for i in range(1, self.network.workers + 1)])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stop(self) -> None:  # as tests/sparkcluster.SparkCluster
        self.close()

    def close(self) -> None:
        """Stop the Spark daemons (and their executors), then remove the network; idempotent."""
        try:
            if self.spark_cluster is not None:
                self.spark_cluster.stop()
        finally:
            self.network.down()

    @property
    def master_url(self) -> str:
        return self.spark_cluster.master_url

    @property
    def driver_host(self) -> str:
        return self.network.hub_ip

    @property
    def worker_hosts(self) -> list[str]:
        return self.network.worker_ips

    def spark_conf(self) -> dict[str, str]:
        """A driver's settings: reachable from the workers on the hub address."""
        return {"spark.driver.host": self.driver_host, "spark.driver.bindAddress": self.driver_host,
                "spark.executor.memory": "1g", "spark.ui.enabled": "true"}

    def info(self) -> dict:
        """What a driver in another process needs (see ``smoke-driver``)."""
        n = self.network
        return {"master_url": self.master_url, "driver_host": self.driver_host, "worker_hosts": self.worker_hosts,
                "index": n.index, "link": n.link, "delay_ms": n.delay_ms, "note": n.note,
                "description": n.description()}


def network_of(info: dict) -> Network:
    """The Network a driver process reads counters from (it does not own it: never ``up()``)."""
    return Network(index=info["index"], link=info["link"], delay_ms=info["delay_ms"], note=info.get("note", ""))


# ---- per-query figures for a driver on this cluster ----------------------------------------------

def assign_hosts(plan, worker_hosts: list[str]):
    """``plan`` with each backend's host set to a worker's address ("the backends on its disks"),
    backends with more of the plan's buckets first, each to the worker holding fewest buckets so
    far; the locality jar then reports those hosts and tasks run NODE_LOCAL on that worker."""
    from airflow_colocate.spark import locality

    count = {root: 0 for root in plan.backend_hosts}
    for t in plan.tables:
        for p in t.partitions:
            for path in p.bucket_paths:
                owner = locality.host_of(path, {r: r for r in plan.backend_hosts}) if path else None
                if owner:
                    count[owner] += 1
    load = {h: 0 for h in worker_hosts}
    hosts = {}
    for root in sorted(count, key=lambda r: (-count[r], r)):
        host = min(load, key=lambda h: (load[h], h))
        hosts[root] = host
        load[host] += count[root]
    return replace(plan, backend_hosts=hosts)


def _api(spark) -> str:
    sc = spark.sparkContext
    return f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"


def _get(url: str):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


class QueryProbe:
    """Bytes over the link and the tasks' locality of each query, kept per label (e.g. SQL1/shuffle).
    ``mark()`` before the query and ``record()`` after it stay outside the timed query."""

    def __init__(self, network: Network, worker_hosts: list[str] | None = None) -> None:
        self.network = network
        self.worker_hosts = worker_hosts or network.worker_ips
        self.rows: dict[str, list[dict]] = {}

    def localize(self, plan):
        """:func:`assign_hosts` over this cluster's workers."""
        return assign_hosts(plan, self.worker_hosts)

    def mark(self, spark) -> tuple[dict[str, int], int]:
        last = max((j["jobId"] for j in _get(f"{_api(spark)}/jobs")), default=-1)
        return self.network.counters(), last

    def record(self, spark, label: str, mark: tuple[dict[str, int], int]) -> dict:
        sent = self.network.sent_since(mark[0])
        api = _api(spark)
        for _ in range(100):  # the status store takes the last task ends a moment after the job returns
            jobs = [j for j in _get(f"{api}/jobs") if j["jobId"] > mark[1]]
            if all(j["status"] != "RUNNING" for j in jobs):
                break
            time.sleep(0.1)
        levels: dict[str, int] = {}
        input_levels: dict[str, int] = {}
        shuffle_write = shuffle_remote = 0
        for sid in sorted({s for j in jobs for s in j["stageIds"]}):
            try:
                attempts = _get(f"{api}/stages/{sid}")
            except OSError:  # a skipped stage (its shuffle reused) has no attempt
                continue
            for a in attempts:
                if a.get("status") == "SKIPPED":
                    continue
                shuffle_write += int(a.get("shuffleWriteBytes", 0))
                shuffle_remote += int(a.get("shuffleRemoteBytesRead", 0))
                for t in _get(f"{api}/stages/{sid}/{a['attemptId']}/taskList?length=1000000"):
                    level = t.get("taskLocality", "?")
                    levels[level] = levels.get(level, 0) + 1
                    if a.get("inputBytes"):
                        input_levels[level] = input_levels.get(level, 0) + 1
        row = {"link_bytes": sum(sent.values()), "sent": sent, "levels": levels, "input_levels": input_levels,
               "shuffle_write": shuffle_write, "shuffle_remote": shuffle_remote}
        self.rows.setdefault(label, []).append(row)
        return row

    def lines(self) -> list[str]:
        def lv(d: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"

        out = []
        for label, rows in self.rows.items():
            mib = sorted(r["link_bytes"] for r in rows)[len(rows) // 2] / 2**20
            last = rows[-1]
            out.append(f"{label}: {mib:.2f} MiB over the link (median of {len(rows)}; last: hub "
                       f"{last['sent']['hub'] / 2**20:.2f}, " + ", ".join(
                           f"{k} {v / 2**20:.2f}" for k, v in last["sent"].items() if k != "hub")
                       + f" MiB sent); shuffle written {last['shuffle_write'] / 2**20:.2f} MiB, fetched remotely "
                       f"{last['shuffle_remote'] / 2**20:.2f} MiB; input tasks: {lv(last['input_levels'])}; "
                       f"all tasks: {lv(last['levels'])}")
        return out


# ---- a small end-to-end check (the test and `smoke` run it in a driver process of their own) -----

SMOKE_BUCKETS = 8
SMOKE_DAYS = ("2026-10-01", "2026-10-02")
SMOKE_SQL = "SELECT a.dt, a.id, a.v AS av, b.v AS bv FROM {A} a JOIN {B} b ON a.dt = b.dt AND a.id = b.id"
SMOKE_SCHEMA = [("id", "bigint"), ("v", "string"), ("dt", "date")]


def smoke_lake(spark, work: Path, rows: int, hosts: list[str]) -> str:
    """Tables A and B (``rows`` a day, SMOKE_DAYS) of one group on two backends, backend *i* on
    ``hosts[i]``, written by the write job in ``spark``; returns the catalog's URL."""
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.core.contract import Source
    from airflow_colocate.jobs.write import write_in_session

    days = ", ".join(f"DATE'{d}'" for d in SMOKE_DAYS)
    for t in "AB":  # ids unique and unsorted, as the seeds' (bench_seeds.ID)
        spark.sql(f"SELECT pmod(k * 2654435761, 1099511627776) AS id, concat('{t}', k) AS v, "
                  f"element_at(array({days}), int(g / {rows}) + 1) AS dt "
                  f"FROM (SELECT id AS g, id % {rows} AS k FROM range({rows * len(SMOKE_DAYS)}))"
                  ).repartition(len(SMOKE_DAYS), "dt").write.partitionBy("dt").parquet(str(work / "plain" / t))
    url = f"sqlite:///{work / 'catalog.db'}"
    cat = Catalog(url, actor="netns-smoke")
    cat.init()
    for i, host in enumerate(hosts, 1):  # each worker's "disk": a backend on its host
        (work / "lake" / f"be{i}").mkdir(parents=True)
        cat.backends.add((work / "lake" / f"be{i}").as_uri(), name=f"be{i}", host=host)
    for t in "AB":
        cat.tables.create(t, SMOKE_SCHEMA, ["id"], bucket_num=SMOKE_BUCKETS, replication_num=1,
                          partition_cols=["dt"], colocate_with="g_smoke")
        for day in SMOKE_DAYS:
            write_in_session(spark, cat, t, day, Source(format="parquet", path=str(work / "plain" / t / f"dt={day}")),
                             work_dir=work / "runs")
    cat.dispose()
    return url


def smoke_driver(info: dict, work: Path, rows: int, catalog_url: str | None = None) -> dict:
    """A colocated join of tables A and B (the join job's path; ``catalog_url``'s lake, or one
    :func:`smoke_lake` writes) and plain Spark's shuffle join of the same replica files, on the
    cluster of ``info``: their rows (as digests), wall time and what each sent over the link."""
    from pyspark.sql import functions as F

    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.join import finish_join, prepare_join
    from airflow_colocate.spark.join_job import run_join
    from airflow_colocate.spark.session import get_spark

    os.environ["SPARK_LOCAL_IP"] = info["driver_host"]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = {"spark.driver.host": info["driver_host"], "spark.driver.bindAddress": info["driver_host"],
            "spark.executor.memory": "768m", "spark.driver.memory": "768m", "spark.ui.enabled": "true",
            "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": str(SMOKE_BUCKETS),
            "spark.sql.autoBroadcastJoinThreshold": "-1",
            # a loaded host (a full test run on 2 cores) can keep a worker's executor busy past the
            # default 3 s, and Spark then runs a bucket task ANY: the smoke checks where tasks run
            "spark.locality.wait": "30s",
            "spark.sql.warehouse.dir": (work / "warehouse").as_uri()}
    spark = get_spark("netns-smoke", info["master_url"], conf)
    spark.sparkContext.setLogLevel("ERROR")
    probe = QueryProbe(network_of(info), info["worker_hosts"])
    try:
        url = catalog_url or smoke_lake(spark, work, rows, info["worker_hosts"])
        # An executor fetches the session's jars and Python files from the driver on its first task:
        # once per application, not per query, so not in the first query's bytes.
        from airflow_colocate.spark.locality import wait_for_executors

        wait_for_executors(spark, set(info["worker_hosts"]), 60)
        spark.sparkContext.parallelize(range(16), 16).map(lambda x: time.sleep(0.1) or x).count()
        cat = Catalog(url, actor="netns-smoke")
        out: dict = {"description": info["description"]}

        mark = probe.mark(spark)
        t0 = time.perf_counter()
        plan, ticket = prepare_join(cat, SMOKE_SQL.format(A="A", B="B"), {"A": None, "B": None}, work_dir=work / "runs",
                                    output_path=str(work / "out-colocated"))
        report = run_join(spark, plan)
        finish_join(cat, ticket, report)
        out["colocated"] = {"wall": time.perf_counter() - t0, **probe.record(spark, "colocated", mark),
                            "colocate": all(j.colocate for j in report.joins),
                            "node_local": report.locality.node_local, "tasks": report.locality.tasks,
                            "backend_hosts": plan.backend_hosts, "phases": report.phases}

        for t in "AB":  # the same replica files, read as plain parquet: Spark shuffles both sides
            _, parts = cat.reads.replicas(t)
            days = [spark.read.parquet(*[b[0].path for b in p.buckets if b[0].rows]).withColumn("dt", F.lit(p.value).cast("date"))
                    for p in parts]
            df = days[0]
            for d in days[1:]:
                df = df.unionByName(d)
            df.createOrReplaceTempView(f"p{t}")
        mark = probe.mark(spark)
        t0 = time.perf_counter()
        spark.sql(SMOKE_SQL.format(A="pA", B="pB")).write.parquet(str(work / "out-shuffle"))
        out["shuffle"] = {"wall": time.perf_counter() - t0, **probe.record(spark, "shuffle", mark)}

        def digest(path: Path) -> list:
            df = spark.read.parquet(str(path)).selectExpr("CAST(dt AS STRING) AS dt", "id", "av", "bv")
            return [df.count(), *df.selectExpr("sum(hash(dt, id, av, bv))", "sum(id)").collect()[0]]

        out["rows"] = {"colocated": digest(work / "out-colocated"), "shuffle": digest(work / "out-shuffle")}
        out["lines"] = probe.lines()
        cat.dispose()
        return out
    finally:
        spark.stop()


def run_smoke_driver(cluster: NetnsCluster, work: Path, rows: int, catalog_url: str | None = None,
                     timeout_s: float = 600) -> dict:
    """:func:`smoke_driver` in a Python process of its own (a process holds one SparkContext, and a
    test process may hold a local one already)."""
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "smoke-driver", "--info", json.dumps(cluster.info()),
           "--work", str(work), "--rows", str(rows), *(["--catalog", catalog_url] if catalog_url else [])]
    env = {**os.environ, "SPARK_LOCAL_IP": cluster.driver_host}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the smoke driver failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
                           f"\n{cluster.spark_cluster.logs()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cleanup(index: int) -> list[str]:
    """Remove what a killed run of ``index`` left (its Spark processes die with their parents'
    sessions only if stopped: kill those by the pids ``ip netns pids`` names first)."""
    net = Network(index=index)
    left = net.leftovers()
    for ns in net.namespaces:
        if ns in _namespaces():
            for pid in _run("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
    net._up = True
    net.down()
    return left


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("smoke", help="bring the cluster up, run a small join both ways, take it down")
    s.add_argument("--link", choices=sorted(LINKS), default="1gbit")
    s.add_argument("--index", type=int, default=1)
    s.add_argument("--rows", type=int, default=200_000, help="rows a day of each of the two tables")
    c = sub.add_parser("cleanup", help="remove the namespaces and links a killed run of --index left")
    c.add_argument("--index", type=int, default=1)
    d = sub.add_parser("smoke-driver", help=argparse.SUPPRESS)
    d.add_argument("--info", required=True)
    d.add_argument("--work", type=Path, required=True)
    d.add_argument("--rows", type=int, required=True)
    d.add_argument("--catalog", help="a lake's catalog URL (tables A and B); default: write one")
    a = ap.parse_args()
    if a.cmd == "smoke-driver":
        print(json.dumps(smoke_driver(json.loads(a.info), a.work, a.rows, a.catalog), default=str))
    elif a.cmd == "cleanup":
        left = cleanup(a.index)
        print(f"removed: {', '.join(left)}" if left else f"nothing of netns cluster {a.index} was left")
    else:
        reason = unavailable()
        if reason:
            print(f"skipped: {reason}")
            return
        work = Path(tempfile.mkdtemp(prefix="netns-smoke-"))
        with NetnsCluster(work / "cluster", link=a.link, index=a.index) as cl:
            print(cl.network.description(), flush=True)
            res = run_smoke_driver(cl, work / "driver", a.rows)
        print("\n".join(res["lines"]))
        print(f"rows equal: {res['rows']['colocated'] == res['rows']['shuffle']} ({res['rows']['colocated'][0]} rows); "
              f"wall colocated {res['colocated']['wall']:.2f}s, shuffle {res['shuffle']['wall']:.2f}s")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
