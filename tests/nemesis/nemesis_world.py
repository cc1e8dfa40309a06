"""The lake a nemesis schedule runs against, and the hands that hurt it: a catalog (SQLite, or a
PostgreSQL server of its own that a fault restarts), three backends in local folders and a fourth
on a size-limited tmpfs (ENOSPC; a SQLite catalog sits on one too), two tables of one group (4 buckets, replication 2), one Spark
session for the ops that need Spark, and a process per op that a fault may SIGKILL.

Faults are entries of :data:`FAULTS` (kind -> inject, heal): a new kind is one more pair of
functions and a weight in nemesis_schedule.FAULT_KINDS. With PostgreSQL the worker processes run
in a network namespace and reach the server over a veth (tests/faults/catalog_link.py), which the
'link' fault cuts; the harness's own catalog and Spark lane stay on 127.0.0.1, so every check sees
the truth. A stalled
backend is tests/faults' own stalling file system (slowfs) mounted over a backend's root, the real
directory bind-mounted aside, for a step or two. Mounts are undone in :meth:`World.close`, which callers run in
``finally``."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from nemesis_model import RETENTION_DAYS, rows
from nemesis_schedule import BACKENDS, TABLES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from slowfs import SlowFs  # noqa: E402

from airflow_colocate.catalog import Catalog
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import fs, replica_dir

OP_SCRIPT = Path(__file__).resolve().with_name("nemesis_op.py")
TMPFS_SIZE = "3m"
COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)


def _fill(ballast: Path) -> None:
    """Write zeros to ``ballast`` until its file system has no byte left."""
    try:
        with open(ballast, "ab") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:
        pass


def kill_family(proc: subprocess.Popen) -> None:
    """Freeze the op's process group and every process it started, then SIGKILL them all: a node
    lost mid-step, no cleanup (as tests/operators/test_write_killed.py does)."""
    import psutil

    try:
        os.killpg(proc.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    family: dict = {}
    while True:
        try:
            found = {p.pid: p for p in psutil.Process(proc.pid).children(recursive=True)} | family
        except psutil.NoSuchProcess:
            found = family
        for p in found.values():
            try:
                p.suspend()
            except psutil.NoSuchProcess:
                pass
        if found.keys() == family.keys():
            break
        family = found
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for p in family.values():
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()
    psutil.wait_procs(list(family.values()), timeout=30)


class World:
    def __init__(self, root: Path, url: str, spark, *, pg=None, link=None, echo=print) -> None:
        self.root, self.url, self.spark, self.pg, self.echo = root, url, spark, pg, echo
        self.link = link if pg is not None else None  # catalog_link.CatalogLink: ops reach PostgreSQL over it
        self.link_steps = 0
        self.mounts: list[Path] = []  # innermost last
        self.down: dict[str, int] = {}  # backend -> steps left
        self.stalled: dict[str, list] = {}  # backend -> [its stalling file system, steps left]
        self.full_steps = 0
        self.catalog_full_steps = 0
        self.procs: dict[int, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.env = dict(os.environ, COLOCATE_CATALOG_URL=url, COLOCATE_HOME=str(root / "home"),
                        COLOCATE_ACTOR="nemesis")
        if self.link is not None:
            from sqlalchemy.engine import make_url

            self.env["COLOCATE_CATALOG_URL"] = make_url(url).set(host=self.link.hub_ip).render_as_string(False)
        self.catalog: Catalog | None = None

    # -- the lake ---------------------------------------------------------------------------
    def backend_root(self, name: str) -> Path:
        return self.root / "backends" / name

    def setup(self) -> None:
        (self.root / "home" / "runs").mkdir(parents=True, exist_ok=True)
        for name in BACKENDS:
            self.backend_root(name).mkdir(parents=True, exist_ok=True)
        small = self.backend_root(BACKENDS[-1])
        _run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(small)])
        self.mounts.append(small)
        if self.catalog_dir() is not None:
            self.catalog_dir().mkdir(parents=True, exist_ok=True)
            _run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(self.catalog_dir())])
            self.mounts.append(self.catalog_dir())
        self.catalog = Catalog(self.url, actor="nemesis")
        self.catalog.init()
        from airflow_colocate.jobs.backends import add_backend

        for name in BACKENDS:  # as 'colocate backend add' does: with the identity marker
            add_backend(self.catalog, self.backend_root(name).as_uri(), name=name)
        for t in TABLES:
            self.catalog.tables.create(t, COLUMNS, ["id"], bucket_num=4, replication_num=2, partition_cols=["dt"],
                                       colocate_with="g")
        from airflow_colocate.jobs.tables import TableChange, alter_table

        alter_table(self.catalog, "b", TableChange(retention_days=RETENTION_DAYS))

    def close(self) -> None:
        for proc in list(self.procs.values()):
            kill_family(proc)
        for name in list(self.stalled):
            self.unstall(name)
        self.link_up()  # the link outlives this lake: the next schedule's ops go through it
        for mount in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        self.mounts.clear()
        if self.catalog is not None:
            self.catalog.dispose()

    def catalog_dir(self) -> Path | None:
        """Where a SQLite catalog lives (a tmpfs of its own, for ENOSPC under the catalog)."""
        if not self.url.startswith("sqlite:///"):
            return None
        return Path(self.url.removeprefix("sqlite:///")).parent

    def extra_columns(self, table: str) -> list[str]:
        return [n for n, _ in self.catalog.tables.get(table).columns if n not in ("id", "v", "dt")]

    # -- ops ----------------------------------------------------------------------------------
    def start(self, lane: int, op: dict) -> subprocess.Popen:
        out = self.root / "logs"
        out.mkdir(exist_ok=True)
        cmd = [sys.executable, str(OP_SCRIPT), json.dumps(op)]
        proc = subprocess.Popen(self.link.run_inside(cmd) if self.link else cmd, env=self.env,
                                start_new_session=True, stdout=open(out / f"lane{lane}.out", "w"),
                                stderr=open(out / f"lane{lane}.err", "w"))
        with self.lock:
            self.procs[lane] = proc
        return proc

    def last_error(self, lane: int) -> str:
        lines = (self.root / "logs" / f"lane{lane}.err").read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def kill(self, lane: int) -> bool:
        with self.lock:
            proc = self.procs.get(lane)
        if proc is None or proc.poll() is not None:
            return False
        kill_family(proc)
        return True

    def source(self, name: str, table: str, parts: dict[str, int]) -> Path:
        """A source dataset: one dt=… folder per day (an import's) or one folder (a write's)."""
        base = self.root / "sources" / name
        extra = self.extra_columns(table)
        for dt, seed in parts.items():
            got = sorted(rows(table, dt, seed))
            cols = {"id": pa.array([i for i, _, _ in got], pa.int64()), "v": pa.array([v for _, v, _ in got])}
            cols |= {n: pa.nulls(len(got), pa.string()) for n in extra}
            folder = base / f"dt={dt}" if len(parts) > 1 or name.startswith("import") else base
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table(cols), folder / "part-0.parquet")
        return base

    def spark_op(self, op: dict):
        """Run a Spark lane op in the shared session; returns what a read saw (or None)."""
        from airflow_colocate.core.contract import Source
        from airflow_colocate.jobs.bulk_import import import_in_session
        from airflow_colocate.jobs.read import query
        from airflow_colocate.jobs.verify import session_runner, verify
        from airflow_colocate.jobs.write import write_in_session

        kind, cat, work = op["kind"], self.catalog, self.root / "home" / "runs"
        if kind == "spark_write":
            src = self.source(f"w{op['wseed']}", op["table"], {op["dt"]: op["wseed"]})
            write_in_session(self.spark, cat, op["table"], op["dt"], Source(format="parquet", path=str(src)), work_dir=work)
        elif kind == "import":
            src = self.source(f"import{op['wseed']}", op["table"], {d: op["wseed"] for d in op["dts"]})
            out = import_in_session(self.spark, cat, op["table"], str(src), work_dir=work, echo=lambda _: None)
            if out.get("failed"):
                raise RuntimeError(f"import failed for {out['failed']}")
        elif kind == "read":
            return {op["table"]: self.read_table(op["table"])}
        elif kind == "join":
            sql = ("SELECT CAST(a.dt AS STRING) AS dt, a.id, a.v AS av, b.v AS bv FROM a JOIN b "
                   "ON a.id = b.id AND a.dt = b.dt")
            return {"join": [tuple(r) for r in query(self.spark, sql, {"a": None, "b": None}, catalog=cat)]}
        elif kind == "verify":
            out = verify(cat, session_runner(self.spark), work_dir=work, echo=lambda _: None)
            return {"verify_bad": out.get("bad", [])}
        return None

    def read_table(self, table: str) -> list[tuple]:
        """A registered read, as a notebook makes it: ``register`` and the user's own SQL."""
        from airflow_colocate.jobs.read import register

        register(self.spark, {table: None}, catalog=self.catalog)
        return [tuple(r) for r in self.spark.sql(f"SELECT id, v, CAST(dt AS STRING) FROM {table}").collect()]

    # -- faults -------------------------------------------------------------------------------
    def take_down(self, fault: dict) -> bool:
        name = fault["backend"]
        if name in self.down or self.down or name in self.stalled:  # one at a time: replication 2 keeps a copy
            return False
        where = self.backend_root(name)
        _run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(where)])
        self.mounts.append(where)
        self.down[name] = fault["steps"]
        return True

    def bring_up(self, name: str) -> None:
        where = self.backend_root(name)
        subprocess.run(["umount", "-l", str(where)], check=True, capture_output=True)
        self.mounts.remove(where)
        del self.down[name]

    def stall(self, fault: dict) -> bool:
        """Every read of the backend's files waits ``delay`` seconds (writes pass), for a step or two."""
        name = fault["backend"]
        if name in self.down or name in self.stalled or not os.path.exists("/dev/fuse"):
            return False
        root, aside = self.backend_root(name), self.root / f"{name}-disk"
        aside.mkdir(exist_ok=True)
        _run(["mount", "--bind", str(root), str(aside)])  # no moment without the files at the root
        self.mounts.append(aside)
        disk = SlowFs(aside, root, delay=fault["delay"])
        disk.__enter__()
        self.stalled[name] = [disk, fault["steps"]]
        return True

    def unstall(self, name: str) -> None:
        disk, _ = self.stalled.pop(name)
        disk.__exit__(None, None, None)
        aside = self.root / f"{name}-disk"
        subprocess.run(["umount", "-l", str(aside)], capture_output=True)
        self.mounts.remove(aside)

    def fill_up(self, fault: dict) -> bool:
        """Fill the tmpfs backend to the last byte: every write, clone or plan file there meets ENOSPC."""
        if self.full_steps:
            return False
        _fill(self.backend_root(BACKENDS[-1]) / "ballast.nemesis")
        self.full_steps = fault["steps"]
        return True

    def fill_catalog(self, fault: dict) -> bool:
        """Fill the SQLite catalog's file system: a commit that needs a page or a journal meets ENOSPC."""
        if self.catalog_full_steps or self.catalog_dir() is None:
            return False
        _fill(self.catalog_dir() / "ballast.nemesis")
        self.catalog_full_steps = fault["steps"]
        return True

    def free_catalog(self) -> None:
        if self.catalog_dir() is not None:
            (self.catalog_dir() / "ballast.nemesis").unlink(missing_ok=True)
        self.catalog_full_steps = 0

    def free_space(self) -> None:
        (self.backend_root(BACKENDS[-1]) / "ballast.nemesis").unlink(missing_ok=True)
        self.full_steps = 0

    def corrupt(self, fault: dict) -> bool:
        """Flip a byte of, truncate or delete one file of a visible version's replica, behind the
        catalog's back, only where every other replica of the bucket is still intact."""
        choices = []
        for t in TABLES:
            _, parts = self.catalog.reads.replicas(t)
            for p in parts:
                for bucket in p.buckets:
                    intact = [r for r in bucket if self.intact(r)]
                    if len(intact) == len(bucket) >= 2:
                        for r in bucket:
                            choices += [fs.join(r.path, n) for n, _ in replica_dir.replica_files(r.path)]
        if not choices:
            return False
        path = Path(fs.local_path(sorted(choices)[fault["pick"] % len(choices)]))
        how = fault["how"]
        if how == "delete":
            path.unlink()
        elif how == "truncate":
            os.truncate(path, path.stat().st_size // 2)
        else:
            data = bytearray(path.read_bytes())
            at = random.Random(fault["pick"]).randrange(len(data))
            data[at] ^= 0xFF
            path.write_bytes(bytes(data))
        return True

    def intact(self, r) -> bool:
        try:
            files = [(n, copy_mod.sha256_file(fs.join(r.path, n))) for n, _ in replica_dir.replica_files(r.path)]
        except OSError:
            return False
        return replica_dir.replica_checksum(files) == r.checksum

    def pg_restart(self, fault: dict) -> bool:
        """Stop the catalog's PostgreSQL at once (-m immediate: a crash) and start it again. The
        server commits synchronously (started ``durable``): without, a crash loses the commits it
        confirmed last, which the model rightly calls a lost acknowledged write."""
        if self.pg is None:
            return False
        from pgserver import _as_user, _clean_env

        pg = self.pg
        ctl = str(pg.bin_dir / "pg_ctl")
        subprocess.run(_as_user([ctl, "-D", str(pg.data_dir), "-m", "immediate", "-w", "stop"], pg._run_as),
                       env=_clean_env(), cwd="/", capture_output=True, timeout=60)
        time.sleep(0.5)
        options = (f"-p {pg.port} -k {pg.socket_dir} -c listen_addresses={pg.listen} -c fsync=off "
                   "-c synchronous_commit=on -c full_page_writes=off -c max_connections=100")
        subprocess.run(_as_user([ctl, "-D", str(pg.data_dir), "-l", str(pg.log_path), "-w", "-o", options, "start"],
                                pg._run_as), env=_clean_env(), cwd="/", capture_output=True, timeout=90, check=True)
        return True

    def cut_link(self, fault: dict) -> bool:
        """Cut the worker processes off the catalog's PostgreSQL for a step or two."""
        if self.link is None or self.link_steps:
            return False
        self.link.cut(fault["how"])
        self.link_steps = fault["steps"]
        return True

    def link_up(self) -> None:
        if self.link is not None:
            self.link.restore()
        self.link_steps = 0

    def end_of_step(self) -> None:
        """Faults that last a number of steps end when it is used up."""
        for name in list(self.down):
            self.down[name] -= 1
            if self.down[name] <= 0:
                self.bring_up(name)
        for name in list(self.stalled):
            self.stalled[name][1] -= 1
            if self.stalled[name][1] <= 0:
                self.unstall(name)
        if self.full_steps:
            self.full_steps -= 1
            if not self.full_steps:
                self.free_space()
        if self.catalog_full_steps:
            self.catalog_full_steps -= 1
            if not self.catalog_full_steps:
                self.free_catalog()
        if self.link_steps:
            self.link_steps -= 1
            if not self.link_steps:
                self.link_up()

    def heal(self) -> None:
        for name in list(self.down):
            self.bring_up(name)
        for name in list(self.stalled):
            self.unstall(name)
        self.free_space()
        self.free_catalog()
        self.link_up()


# kind -> how it strikes (the World, the fault's JSON) -> whether it did. 'kill' is the harness's.
FAULTS = {
    "down": World.take_down,
    "enospc": World.fill_up,
    "catalog_full": World.fill_catalog,
    "corrupt": World.corrupt,
    "pg_restart": World.pg_restart,
    "stall": World.stall,
    "link": World.cut_link,
}
