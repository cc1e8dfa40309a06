"""Every service of docker/compose.yaml started from its own command, without a container engine.

There is no Docker engine here, so this reproduces what the image gives each container as far as
a test can, and then runs the service's command and its health check exactly as compose would:

- the user: the image runs as a non-root user; here every service runs as ``nobody`` (PostgreSQL
  as ``postgres``), through ``setpriv``, with a fresh HOME;
- the image's files: its Python is a venv of the system Python 3.11 whose site-packages are this
  project's ``.venv`` ones, owned by root and read-only to the service (as ``pip install`` as root
  leaves them in the image); ``/opt/airflow-colocate`` is this checkout (root-owned, read-only);
  the directories the Dockerfile creates and hands to the airflow user are per-service temporary
  directories owned by the service user; each named volume is one shared temporary directory;
- the environment: the Dockerfile's ``ENV`` lines, then the service's compose ``environment``,
  with the image's paths mapped onto those directories and service names and ports onto
  127.0.0.1 and free ports (several services listen on 8080 in their own containers);
- the ENTRYPOINT (``tini --`` dropped: signals are the test's concern here);
- PostgreSQL: the official image's entrypoint steps with the Debian server binaries (initdb with
  the password file, the init scripts mounted at ``/docker-entrypoint-initdb.d`` against a
  socket-only server, then the server on TCP).

Services start in ``depends_on`` order; each must reach its health check (one-shot services must
exit 0). Both bugs of issue 16 fail it: a passwords file the service cannot append to (the API
server never becomes healthy) and Spark workers without ``--work-dir`` (they exit 1 on the
root-owned site-packages).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from pgserver import find_pg_bin

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
IMAGE_BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # python:3.11-slim
SYSTEM_PYTHON = Path("/usr/bin/python3.11")
SERVICE_USER = "nobody"
DEADLINE_S = 300
HEALTH_INTERVAL_CAP_S = 8.0  # compose's intervals (up to 30 s), shortened; a check of an Airflow job
# imports Airflow (seconds of CPU), so checking more often slows the services it waits for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seconds(value: str | None, default: float) -> float:
    if not value:
        return default
    m = re.fullmatch(r"(\d+)(ms|s|m)", value)
    assert m, f"unreadable duration {value!r}"
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


def dockerfile_image(target: str) -> tuple[dict[str, str], list[str], list[str], str]:
    """The ENV (base stage, then ``target``), ENTRYPOINT, the directories made for the airflow
    user (``mkdir -p`` of the RUN that chowns them) and the WORKDIR of the Dockerfile's stage."""
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {"PATH": IMAGE_BASE_PATH}
    entrypoint: list[str] = []
    owned: list[str] = []
    workdir = "/"
    stage = None
    for line in text.splitlines():
        if m := re.match(r"FROM \S+ AS (\w+)", line):
            stage = m.group(1)
        if stage not in ("base", target):
            continue
        if line.startswith("ENV "):
            for key, value in re.findall(r"(\w+)=(\S+)", line[4:]):
                env[key] = value.replace("$PATH", env.get("PATH", ""))
        elif line.startswith("ENTRYPOINT "):
            entrypoint = json.loads(line[len("ENTRYPOINT "):])
        elif line.startswith("WORKDIR "):
            workdir = line.split()[1]
        elif line.startswith("RUN ") and "chown" in line and "mkdir -p" in line:
            made = re.search(r"mkdir -p ([^&]+)", line).group(1).split()
            owned += [p for p in made if p in line.split("chown", 1)[1] or any(p.startswith(o + "/") for o in line.split("chown", 1)[1].split())]
    if entrypoint[:2] == ["/usr/bin/tini", "--"]:
        entrypoint = entrypoint[2:]
    return env, entrypoint, owned, workdir


@dataclass
class Service:
    name: str
    spec: dict
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    user: str = SERVICE_USER
    cwd: Path = REPO
    log: Path | None = None
    proc: subprocess.Popen | None = None
    check: subprocess.Popen | None = None
    next_check: float = 0.0
    check_started: float = 0.0
    healthy: bool = False
    done: bool = False  # a one-shot that exited 0
    error: str | None = None
    pg: dict | None = None

    @property
    def one_shot(self) -> bool:
        return str(self.spec.get("restart", "")).lower() == "no"


class Stack:
    """The compose file turned into processes on this machine (see the module docstring)."""

    def __init__(self, base: Path, compose: dict, image_bin: Path):
        self.base, self.compose, self.image_bin = base, compose, image_bin
        self.ports: dict[tuple[str, int], int] = {}
        # a named volume lives where it is mounted (every service mounts it at one path), so the
        # directories above the mount points map consistently too (/colocate/backends)
        self.volumes: dict[str, Path] = {}
        for spec in compose["services"].values():
            for volume in spec.get("volumes", []):
                source, target = volume.split(":")[:2]
                if source in compose.get("volumes", {}):
                    self.volumes.setdefault(source, base / "volumes" / target.lstrip("/"))
        self.services = {name: Service(name, spec) for name, spec in compose["services"].items()}
        self.uid = pwd.getpwnam(SERVICE_USER).pw_uid
        self.gid = pwd.getpwnam(SERVICE_USER).pw_gid
        for path in self.volumes.values():
            path.mkdir(parents=True)
            for p in [path, *path.parents]:
                if p == base:
                    break
                os.chown(p, self.uid, self.gid)

    # ------------------------------------------------------------------ mapping

    def port(self, host: str, port: int) -> int:
        return self.ports.setdefault((host, port), _free_port())

    def paths(self, svc: Service) -> dict[str, str]:
        """Image path -> this machine's path, for one service."""
        root = self.base / "roots" / svc.name
        out = {"/usr/local/bin": str(self.image_bin), "/usr/local/lib/python3.11/site-packages": str(SITE_PACKAGES),
               "/opt/airflow-colocate": str(REPO)}
        if "build" in svc.spec:
            _, _, owned, _ = dockerfile_image(svc.spec["build"]["target"])
            for path in [*owned, "/tmp", f"/home/{svc.user}"]:
                out[path] = str(root / path.lstrip("/"))
        for volume in svc.spec.get("volumes", []):
            source, target = volume.split(":")[:2]
            out[target] = str(self.volumes[source] if source in self.volumes else (DOCKER / source).resolve())
            if source in self.volumes:
                for parent in Path(target).parents:
                    if str(parent) != "/":
                        out.setdefault(str(parent), str(self.base / "volumes" / str(parent).lstrip("/")))
        return out

    def rewrite(self, svc: Service, value: str) -> str:
        paths = self.paths(svc)  # one pass: a mapped path is never mapped again (/tmp!)
        alternation = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
        value = re.sub(rf"(?<![\w.-])({alternation})(?![\w.-])", lambda m: paths[m.group(1)], value)
        for other in self.services:  # name:port -> 127.0.0.1:free port
            value = re.sub(rf"(?<=[@/]){re.escape(other)}:(\d+)",
                           lambda m, o=other: f"127.0.0.1:{self.port(o, int(m.group(1)))}", value)
        value = re.sub(r"\blocalhost:(\d+)", lambda m: f"127.0.0.1:{self.port(svc.name, int(m.group(1)))}", value)
        return value

    def rewrite_argv(self, svc: Service, argv: list[str]) -> list[str]:
        out = []
        for i, arg in enumerate(argv):
            prev = argv[i - 1] if i else ""
            if prev in ("--port", "--webui-port", "-p") and arg.isdigit():
                arg = str(self.port(svc.name, int(arg)))
            elif prev == "--host" and arg in self.services:
                arg = "127.0.0.1"
            out.append(self.rewrite(svc, arg))
        return out

    def prepare(self, svc: Service) -> None:
        spec = svc.spec
        if "build" in spec:
            image_env, entrypoint, _, workdir = dockerfile_image(spec["build"]["target"])
        else:
            image_env, entrypoint, workdir = {}, [], "/"
        env = {"LANG": "C.UTF-8", "HOME": f"/home/{svc.user}", "USER": svc.user, **image_env}
        for key, value in (spec.get("environment") or {}).items():
            value = str(value)
            if key.endswith("_PORT") and value.isdigit():
                value = str(self.port("postgres" if key.startswith("POSTGRES") else svc.name, int(value)))
            elif key.endswith(("_HOST", "_HOSTNAME")) and value in self.services:
                value = "127.0.0.1"
            env[key] = value
        svc.env = {k: self.rewrite(svc, v) for k, v in env.items()}
        for path in self.paths(svc).values():
            p = Path(path)
            if str(p).startswith(str(self.base / "roots")):
                p.mkdir(parents=True, exist_ok=True)
                for q in [p, *p.parents]:
                    if q == self.base:
                        break
                    os.chown(q, self.uid, self.gid)
        svc.cwd = Path(self.rewrite(svc, workdir))
        svc.log = self.base / "logs" / f"{svc.name}.log"
        svc.log.parent.mkdir(exist_ok=True)
        svc.argv = self.rewrite_argv(svc, [*entrypoint, *spec.get("command", [])])

    # ------------------------------------------------------------------ running

    def as_user(self, user: str, argv: list[str]) -> list[str]:
        pw = pwd.getpwnam(user)
        return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--", *argv]

    def start(self, svc: Service) -> None:
        self.prepare(svc)
        if "healthcheck" in svc.spec:  # as compose: the first check one interval after the start
            svc.next_check = time.monotonic() + self.interval(svc)
        if svc.name == "postgres":
            self.start_postgres(svc)
            return
        svc.proc = subprocess.Popen(self.as_user(svc.user, svc.argv), env=svc.env, cwd=svc.cwd,
                                    stdout=svc.log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)

    def start_postgres(self, svc: Service) -> None:
        """The official postgres image's entrypoint, with the Debian server binaries."""
        bin_dir = find_pg_bin()
        svc.user = "postgres"
        pw = pwd.getpwnam("postgres")
        data, sock = self.volumes["postgres-data"] / "pgdata", self.base / "pg-socket"
        sock.mkdir()
        for p in (self.volumes["postgres-data"], sock):
            os.chown(p, pw.pw_uid, pw.pw_gid)
        env = {**svc.env, "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(sock)}
        port = self.port("postgres", 5432)
        log = svc.log.open("ab")

        def run(argv, **kw):
            r = subprocess.run(self.as_user("postgres", argv), env={**env, **kw.pop("env", {})}, stdout=log,
                               stderr=subprocess.STDOUT, timeout=120, **kw)
            assert r.returncode == 0, f"postgres: {argv[0]} failed (exit {r.returncode}); see {svc.log}:\n{svc.log.read_text()[-3000:]}"

        pwfile = env["POSTGRES_PASSWORD_FILE"]
        assert os.access(pwfile, os.R_OK) or Path(pwfile).exists(), f"postgres: {pwfile} does not exist"
        run([str(bin_dir / "initdb"), "-D", str(data), "-U", env.get("POSTGRES_USER", "postgres"), f"--pwfile={pwfile}",
             "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"])
        with (data / "pg_hba.conf").open("a") as f:  # the image's rule: every host, password
            f.write("host all all all scram-sha-256\n")
        common = ["-c", f"port={port}", "-c", f"unix_socket_directories={sock}", "-c", "fsync=off"]
        run([str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-o", " ".join([*common, "-c", "listen_addresses="]), "start"])
        init_dir = "/docker-entrypoint-initdb.d"
        for volume in svc.spec.get("volumes", []):
            source, target = volume.split(":")[:2]
            if target.startswith(init_dir + "/"):
                script = str((DOCKER / source).resolve())
                argv = ["bash", script] if target.endswith(".sh") else ["psql", "-v", "ON_ERROR_STOP=1", "-f", script]
                run(argv, env={"PGHOST": str(sock), "PGPORT": str(port), "PGUSER": env.get("POSTGRES_USER", "postgres")})
        run([str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-m", "fast", "stop"])
        svc.pg = {"data": data, "bin": bin_dir}
        svc.env = {**env, "PGPORT": str(port)}
        svc.proc = subprocess.Popen(self.as_user("postgres", [str(bin_dir / "postgres"), "-D", str(data), *common,
                                                               "-c", "listen_addresses=127.0.0.1"]),
                                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def interval(self, svc: Service) -> float:
        return min(_seconds(svc.spec["healthcheck"].get("interval"), 30), HEALTH_INTERVAL_CAP_S)

    def health_argv(self, svc: Service) -> list[str]:
        test = svc.spec["healthcheck"]["test"]
        if test[0] == "CMD-SHELL":
            return ["/bin/sh", "-c", self.rewrite(svc, test[1].replace("$$", "$"))]
        assert test[0] == "CMD", f"{svc.name}: health check {test!r}"
        return self.rewrite_argv(svc, test[1:])

    def poll(self, svc: Service) -> None:
        if svc.proc is None or svc.healthy or svc.done or svc.error:
            return
        code = svc.proc.poll()
        if svc.one_shot:
            if code is not None:
                svc.done = code == 0
                svc.error = None if svc.done else f"exited {code}"
            return
        if code is not None:
            svc.error = f"exited {code} before it was healthy"
            return
        if svc.check is not None:
            result = svc.check.poll()
            if result is None and time.monotonic() > svc.check_started + _seconds(svc.spec["healthcheck"].get("timeout"), 30):
                os.killpg(svc.check.pid, signal.SIGKILL)
                svc.check.wait()
                svc.check = None
            elif result is not None:
                svc.healthy, svc.check = result == 0, None
            return
        if time.monotonic() >= svc.next_check:
            svc.check = subprocess.Popen(self.as_user(svc.user, self.health_argv(svc)), env=svc.env, cwd=svc.cwd,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            svc.check_started = time.monotonic()
            svc.next_check = svc.check_started + self.interval(svc)

    def ready(self, dep: str, condition: str) -> bool:
        svc = self.services[dep]
        return svc.done if condition == "service_completed_successfully" else svc.healthy

    def run(self, deadline_s: float) -> dict[str, str]:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            for svc in self.services.values():
                if svc.proc is None and all(self.ready(d, c["condition"]) for d, c in (svc.spec.get("depends_on") or {}).items()):
                    self.start(svc)
                self.poll(svc)
            if any(s.error for s in self.services.values()) or all(s.healthy or s.done for s in self.services.values()):
                break
            time.sleep(0.5)
        return {name: ("healthy" if s.healthy else "exited 0" if s.done else s.error or
                       ("not healthy in time" if s.proc else "never started: waits for " + ", ".join(s.spec.get("depends_on", {}))))
                for name, s in self.services.items()}

    def stop(self) -> None:
        for svc in reversed(list(self.services.values())):
            for proc in (svc.check, svc.proc):
                if proc is not None and proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM if svc.name == "postgres" else signal.SIGKILL)
                        proc.wait(timeout=20)
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        os.killpg(proc.pid, signal.SIGKILL)

    def logs(self, names) -> str:
        out = []
        for name in names:
            log = self.services[name].log
            text = log.read_text(errors="replace") if log and log.exists() else "(no log)"
            out.append(f"----- {name} ({log}) -----\n" + "\n".join(text.splitlines()[-25:]))
        return "\n".join(out)


def image_python(base: Path) -> Path:
    """The image's /usr/local/bin: a venv of the system Python 3.11 that sees this project's
    site-packages (root-owned), with the console scripts the services call."""
    venv = base / "image-python"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "image-site-packages.pth").write_text(f"import site; site.addsitedir({str(SITE_PACKAGES)!r})\n")
    scripts = {"airflow": "from airflow.__main__ import main", "colocate": "from airflow_colocate.cli import main"}
    for name, imp in scripts.items():
        (venv / "bin" / name).write_text(f"#!{venv}/bin/python\nimport sys\n{imp}\nsys.exit(main())\n")
        (venv / "bin" / name).chmod(0o755)
    subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
    return venv / "bin"


def _why_not_here() -> str | None:
    if os.geteuid() != 0 and os.access(SITE_PACKAGES, os.W_OK):
        return ("the services must run as a user that cannot write site-packages (the image's ownership); "
                "this test switches users with setpriv, which needs root")
    for need in ("setpriv", "java", "psql"):
        if shutil.which(need) is None:
            return f"{need} is not installed (apt-get install util-linux openjdk-17-jre-headless postgresql)"
    if find_pg_bin() is None:
        return "the PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql"
    if not SYSTEM_PYTHON.exists() or not SITE_PACKAGES.is_relative_to(REPO):
        return f"needs {SYSTEM_PYTHON} and the project's .venv to stand in for the image's Python"
    return None


@pytest.mark.postgres
@pytest.mark.cluster
def test_every_compose_service_reaches_its_health_check():
    why = _why_not_here()
    if why:
        pytest.skip(f"cannot reproduce the image here: {why}")
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    base = Path(tempfile.mkdtemp(prefix="colocate-compose-"))
    base.chmod(0o755)
    stack = Stack(base, compose, image_python(base))
    started = time.monotonic()
    try:
        states = stack.run(DEADLINE_S)
        elapsed = time.monotonic() - started
        bad = {n: s for n, s in states.items() if s not in ("healthy", "exited 0")}
        assert not bad, f"after {elapsed:.0f} s: {bad}\n{stack.logs(bad)}"
        for name, svc in stack.services.items():
            assert (svc.done if svc.one_shot else svc.healthy), (name, states[name])
        print(f"every compose service healthy in {elapsed:.0f} s: {states}", file=sys.stderr)
    finally:
        stack.stop()
        shutil.rmtree(base, ignore_errors=True)
