"""docker/ checked statically (no Docker engine runs here): the compose file parses, every image is
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
    assert set(services) == {"postgres"} | AIRFLOW_SERVICES | SPARK_SERVICES


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
    assert "pip install --no-cache-dir -r requirements.lock" in dockerfile
    assert "openjdk-17" in dockerfile
    stages = set(re.findall(r"^FROM \S+ AS (\w+)$", dockerfile, re.M))
    assert {"airflow", "spark"} <= stages


def test_every_service_has_a_health_check_and_waits_for_what_it_needs(services):
    for name, svc in services.items():
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name} has no health check"
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            assert cond["condition"] == "service_healthy", f"{name} should wait until {dep} is healthy"
    for name in AIRFLOW_SERVICES - {"airflow-apiserver"}:
        assert {"airflow-apiserver", "spark-master"} <= set(services[name]["depends_on"])
    assert "postgres" in services["airflow-apiserver"]["depends_on"]


def test_backends_and_home_are_mounted_at_the_same_path_everywhere(compose, services):
    mounts = {name: set(services[name]["volumes"]) for name in AIRFLOW_SERVICES | SPARK_SERVICES}
    expected = {"colocate-home:/colocate/home", *(f"be{i}:/colocate/backends/be{i}" for i in (1, 2, 3))}
    for name, m in mounts.items():
        assert expected <= m, f"{name} misses {expected - m}"
    for volume in ("colocate-home", "be1", "be2", "be3", "postgres-data"):
        assert volume in compose["volumes"]
    # the bootstrap registers exactly those backend roots
    bootstrap = (DOCKER / "bootstrap.sh").read_text()
    assert "for be in be1 be2 be3" in bootstrap and 'file:///colocate/backends/$be' in bootstrap
    # and the image creates the mount points, so fresh volumes belong to the airflow user
    dockerfile = (DOCKER / "Dockerfile").read_text()
    for path in ("/colocate/home", "/colocate/backends/be1", "/colocate/backends/be2", "/colocate/backends/be3"):
        assert path in dockerfile


def test_connections_and_environment_the_dags_need(services):
    master_cmd = services["spark-master"]["command"]
    master_port = int(master_cmd[master_cmd.index("--port") + 1])
    for name in AIRFLOW_SERVICES:
        env = services[name]["environment"]
        spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert spark["conn_type"] == "spark" and spark["host"] == "spark://spark-master" and spark["port"] == master_port
        colocate = json.loads(env["AIRFLOW_CONN_COLOCATE_DEFAULT"])
        assert colocate["conn_type"] == "colocate" and colocate["host"] in services
        assert colocate["extra"]["work_dir"].startswith("/colocate/home/")
        assert env["COLOCATE_CATALOG_URL"].startswith("postgresql+psycopg2://") and "@postgres:5432/colocate" in env["COLOCATE_CATALOG_URL"]
        assert env["COLOCATE_LANDING"].startswith(env["COLOCATE_HOME"]) and env["COLOCATE_HOME"] == "/colocate/home"
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/airflow-colocate/dags"
        assert "@postgres:5432/airflow" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-apiserver:8080/")
    for worker in ("spark-worker-1", "spark-worker-2"):
        assert services[worker]["command"][-1] == f"spark://spark-master:{master_port}"
    # the driver runs in the scheduler's tasks; executors must reach it by name
    assert services["airflow-scheduler"]["hostname"] == services["airflow-scheduler"]["environment"]["SPARK_LOCAL_HOSTNAME"]
    init = (DOCKER / "postgres-init.sql").read_text()
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
