"""docker/ checked without a Docker engine (tests/test_compose_services.py starts the services): the compose file parses, every image is
pinned, the Spark image carries the PySpark version the Python side runs, every service has a
health check, every Airflow and Spark container mounts the backends and the colocate home at the
same paths, the connections the DAGs need come from the environment and point at services that
exist, and the README's Docker section names only services, ports and files that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyspark
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
AIRFLOW_SERVICES = {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"}
SPARK_SERVICES = {"spark-master", "spark-worker-1", "spark-worker-2"}
ONE_SHOT = {"secrets"}
PINNED = re.compile(r"^[\w./-]+:(?!latest$)[\w.-]*\d+\.\d+[\w.-]*$")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def locked(name: str) -> str:
    m = re.search(rf"^{re.escape(name)}==(\S+)$", (REPO / "requirements.lock").read_text(), re.M)
    assert m, f"{name} is not pinned in requirements.lock"
    return m.group(1)


def test_the_stack_has_every_service(services):
    assert set(services) == {"postgres"} | AIRFLOW_SERVICES | SPARK_SERVICES | ONE_SHOT


def test_every_image_is_pinned(services):
    for name, svc in services.items():
        assert PINNED.match(svc["image"]), f"{name}: image {svc['image']!r} is not pinned to a version"
    froms = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", (DOCKER / "Dockerfile").read_text(), re.M)
    assert froms and all(PINNED.match(f) for f in froms), froms
    assert not re.search(r"^FROM \S+:latest", (DOCKER / "Dockerfile").read_text(), re.M)


def test_the_spark_image_is_the_pyspark_version(services):
    """Driver and executors must run one Spark: the Spark services' image is built from the same
    Dockerfile and requirements.lock as Airflow's, and its tag is the PySpark version."""
    version = pyspark.__version__
    assert locked("pyspark") == locked("pyspark-client") == version
    for name in SPARK_SERVICES:
        svc = services[name]
        assert svc["image"].rsplit(":", 1)[1] == version, f"{name}: {svc['image']} but PySpark is {version}"
        assert svc["build"]["dockerfile"] == "docker/Dockerfile" and svc["build"]["target"] == "spark"
    for name in AIRFLOW_SERVICES:
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile"
        assert services[name]["build"]["target"] == "airflow"
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -r requirements-runtime.lock" in dockerfile
    assert "openjdk-17" in dockerfile
    stages = set(re.findall(r"^FROM \S+ AS (\w+)$", dockerfile, re.M))
    assert {"airflow", "spark"} <= stages


def test_every_service_has_a_health_check_and_waits_for_what_it_needs(services):
    for name, svc in services.items():
        if name in ONE_SHOT:
            assert svc["restart"] == "no" and "healthcheck" not in svc, f"{name} is one-shot: no restart, no health check"
            continue
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name} has no health check"
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            expected = "service_completed_successfully" if dep in ONE_SHOT else "service_healthy"
            assert cond["condition"] == expected, f"{name} should wait until {dep} is {expected}"
    for name in AIRFLOW_SERVICES - {"airflow-apiserver"}:
        assert {"airflow-apiserver", "spark-master"} <= set(services[name]["depends_on"])
    assert "postgres" in services["airflow-apiserver"]["depends_on"]
    assert {"secrets"} <= set(services["postgres"]["depends_on"]) & set(services["airflow-apiserver"]["depends_on"])


def test_postgres_is_healthy_only_when_the_colocate_database_answers(services):
    """pg_isready passes while the init script still runs or after it failed: the check must log
    in to the colocate database as its own role, with its password, over TCP."""
    test = " ".join(services["postgres"]["healthcheck"]["test"])
    assert "pg_isready" not in test
    assert "-U colocate" in test and "-d colocate" in test and "-h 127.0.0.1" in test and "colocate-db-password" in test


def test_no_secret_in_the_image_or_the_repo(services):
    """Passwords and keys are made by the `secrets` service at the first start, not written here."""
    assert not (DOCKER / "passwords.json").exists()
    texts = {p.name: p.read_text() for p in DOCKER.iterdir() if p.is_file() and not p.name.endswith(".lock")}
    for name, text in texts.items():
        for leak in ("change-me", "admin:admin@", "PASSWORD 'airflow'", "PASSWORD 'colocate'", ":colocate@", ":airflow@"):
            assert leak not in text, f"docker/{name} holds a literal secret ({leak!r})"
    for name, svc in services.items():
        for key, value in (svc.get("environment") or {}).items():
            assert not re.search(r"PASSWORD$|_SECRET$|FERNET|_CONN$|CATALOG_URL", key), \
                f"{name}: {key} is set in compose.yaml; it must come from the secrets volume"
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/colocate/secrets/")
    passwords = services["airflow-apiserver"]["environment"]["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    assert passwords.startswith("/colocate/secrets/"), "the auth manager appends to this file: it must be the airflow user's"


def test_the_runtime_image_has_no_test_dependencies():
    """docker/requirements-runtime.lock pins exactly what requirements.lock pins (same versions),
    without the test extras."""
    def pins(path: Path) -> dict[str, str]:
        return dict(re.findall(r"^([\w.-]+)==(\S+)$", path.read_text(), re.M))

    runtime, full = pins(DOCKER / "requirements-runtime.lock"), pins(REPO / "requirements.lock")
    differ = {k: (v, full.get(k)) for k, v in runtime.items() if full.get(k) != v}
    assert not differ, f"docker/requirements-runtime.lock differs from requirements.lock: {differ}"
    for test_only in ("pytest", "hypothesis", "schemathesis", "tpchgen-cli"):
        assert test_only in full and test_only not in runtime, test_only
    assert {"apache-airflow", "pyspark", "psycopg2-binary", "asyncpg"} <= set(runtime)


def test_backends_and_home_are_mounted_at_the_same_path_everywhere(compose, services):
    mounts = {name: set(services[name]["volumes"]) for name in AIRFLOW_SERVICES | SPARK_SERVICES}
    expected = {"colocate-home:/colocate/home", *(f"be{i}:/colocate/backends/be{i}" for i in (1, 2, 3))}
    for name, m in mounts.items():
        assert expected <= m, f"{name} misses {expected - m}"
    for volume in ("colocate-home", "be1", "be2", "be3", "postgres-data"):
        assert volume in compose["volumes"]
    # the bootstrap registers exactly those backend roots
    bootstrap = (DOCKER / "bootstrap.sh").read_text()
    assert "for be in be1 be2 be3" in bootstrap and 'file://$backends/$be' in bootstrap
    for name in AIRFLOW_SERVICES:
        assert services[name]["environment"]["COLOCATE_BACKENDS"] == "/colocate/backends"
    # and the image creates the mount points, so fresh volumes belong to the airflow user
    dockerfile = (DOCKER / "Dockerfile").read_text()
    for path in ("/colocate/home", "/colocate/backends/be1", "/colocate/backends/be2", "/colocate/backends/be3"):
        assert path in dockerfile


def test_connections_and_environment_the_dags_need(services, tmp_path):
    """The entrypoint turns the secrets volume into the URLs and connections: run it for real."""
    import os
    import subprocess

    master_cmd = services["spark-master"]["command"]
    master_port = int(master_cmd[master_cmd.index("--port") + 1])
    secrets = tmp_path / "secrets"
    made = subprocess.run(["bash", str(DOCKER / "secrets.sh")], env={**os.environ, "COLOCATE_SECRETS": str(secrets)},
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    again = subprocess.run(["bash", str(DOCKER / "secrets.sh")], env={**os.environ, "COLOCATE_SECRETS": str(secrets)},
                           capture_output=True, text=True, timeout=60)
    assert "created" not in again.stdout, "a restart must keep the secrets"
    for name in AIRFLOW_SERVICES:
        env = {k: str(v) for k, v in services[name]["environment"].items()}
        spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert spark["conn_type"] == "spark" and spark["host"] == "spark://spark-master" and spark["port"] == master_port
        assert env["POSTGRES_HOST"] in services
        run = subprocess.run(["bash", str(DOCKER / "entrypoint.sh"), "env", "-0"], capture_output=True, text=True, timeout=30,
                             env={"PATH": os.environ["PATH"], **env, "COLOCATE_SECRETS": str(secrets)})
        assert run.returncode == 0, run.stderr
        out = dict(line.split("=", 1) for line in run.stdout.split("\0") if "=" in line)
        colocate_pw = (secrets / "colocate-db-password").read_text().strip()
        colocate = json.loads(out["AIRFLOW_CONN_COLOCATE_DEFAULT"])
        assert colocate["conn_type"] == "colocate" and colocate["host"] == "postgres" and colocate["password"] == colocate_pw
        assert colocate["extra"]["work_dir"].startswith("/colocate/home/")
        assert out["COLOCATE_CATALOG_URL"] == f"postgresql+psycopg2://colocate:{colocate_pw}@postgres:5432/colocate"
        assert "@postgres:5432/airflow" in out["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert out["AIRFLOW__CORE__FERNET_KEY"] == (secrets / "airflow-fernet-key").read_text().strip()
        assert env["COLOCATE_LANDING"].startswith(env["COLOCATE_HOME"]) and env["COLOCATE_HOME"] == "/colocate/home"
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/airflow-colocate/dags"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-apiserver:8080/")
    # without the secrets the entrypoint says what is missing and who makes it
    env = {k: str(v) for k, v in services["airflow-scheduler"]["environment"].items()}
    run = subprocess.run(["bash", str(DOCKER / "entrypoint.sh"), "true"], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], **env, "COLOCATE_SECRETS": str(tmp_path / "none")})
    assert run.returncode == 1 and "'secrets' service" in run.stderr
    for worker in ("spark-worker-1", "spark-worker-2"):
        cmd = services[worker]["command"]
        assert cmd[-1] == f"spark://spark-master:{master_port}"
        assert cmd[cmd.index("--work-dir") + 1] == "/opt/spark/work", "the default work dir is inside site-packages"
    # the driver runs in the scheduler's tasks; executors must reach it by name
    assert services["airflow-scheduler"]["hostname"] == services["airflow-scheduler"]["environment"]["SPARK_LOCAL_HOSTNAME"]
    init = (DOCKER / "postgres-init.sh").read_text()
    assert "CREATE DATABASE airflow" in init and "CREATE DATABASE colocate" in init


def test_the_readme_docker_section_matches_the_files(services):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Docker"):]
    section = section[: section.find("\n## ", 4) if "\n## " in section[4:] else None]
    assert "docker compose -f docker/compose.yaml up" in section
    named = set(re.findall(r"docker compose -f docker/compose\.yaml (?:exec|logs|stop|start|restart|kill)(?: -\S+(?: \S+)?)* ([a-z0-9-]+)", section))
    assert named, "the Docker section shows no command against a service"
    assert named <= set(services), f"the README names services that do not exist: {named - set(services)}"
    published = {p.split(":")[0] for svc in services.values() for p in svc.get("ports", [])}
    for port in re.findall(r"http://localhost:(\d+)", section):
        assert port in published, f"the README points at localhost:{port}, which no service publishes"
    for path in re.findall(r"`(docker/[\w./-]+)`", section):
        assert (REPO / path).exists(), f"the README names {path}, which does not exist"
    dag_ids = re.findall(r"airflow dags \w+ ([\w-]+)", section)
    assert dag_ids, "the Docker section shows no 'airflow dags' command"
    for dag_id in dag_ids:
        assert (REPO / "dags" / f"{dag_id}.py").exists(), f"the README names DAG {dag_id}, which does not exist"
