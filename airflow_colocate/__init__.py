"""Doris/StarRocks-style colocation groups for Spark data lakes, run and scheduled by Airflow."""

from __future__ import annotations

__version__ = "0.2.0"


# The `colocate` connection's form in Airflow's UI, declared here so the UI knows it without
# importing the hook (Airflow 3 reads it from the provider info).
CONNECTION_FORM = {
    "hidden-fields": [],
    "relabeling": {"host": "Catalog host (PostgreSQL)", "schema": "Catalog database", "login": "User"},
    "placeholders": {
        "host": "postgres.example.com (leave empty for the embedded SQLite catalog)",
        "schema": "colocate",
        "port": "5432",
    },
}
CONNECTION_FIELDS = {
    # A full URL carries the catalog's password: the form masks it like the password field, and
    # Airflow's connection API and UI show it redacted ("format": "password" makes it sensitive).
    "catalog_url": {"label": "Catalog URL",
                    "description": "a full SQLAlchemy URL; overrides host, port and database "
                                   "(e.g. postgresql+psycopg2://user:pw@host/colocate); kept secret like the password",
                    "schema": {"type": ["string", "null"], "format": "password"}},
    "work_dir": {"label": "Work folder",
                 "description": "where plans and reports of Spark jobs go; on a cluster, a folder every "
                                "worker and Airflow can read (default: $COLOCATE_HOME/runs)",
                 "schema": {"type": ["string", "null"]}},
}


def get_provider_info() -> dict:
    """Airflow discovers the package through this entry point (``apache_airflow_provider``)."""
    return {
        "package-name": "airflow-colocate",
        "name": "Colocate",
        "description": "Colocation groups for Spark data lakes: bucketed, placed, repaired, joined without shuffle.",
        "versions": [__version__],
        "operators": [{"integration-name": "Colocate", "python-modules": [
            "airflow_colocate.operators.write", "airflow_colocate.operators.join", "airflow_colocate.operators.balance",
            "airflow_colocate.operators.bulk_import", "airflow_colocate.operators.verify"]}],
        "sensors": [{"integration-name": "Colocate", "python-modules": ["airflow_colocate.sensors.stable"]}],
        "hooks": [{"integration-name": "Colocate", "python-modules": ["airflow_colocate.hooks.catalog"]}],
        "triggers": [{"integration-name": "Colocate", "python-modules": ["airflow_colocate.triggers.stable"]}],
        "asset-uris": [{"schemes": ["colocate"]}],
        "config": {
            "colocate": {
                "description": "The colocate plugin's admin API and Colocation page.",
                "options": {
                    "authorization": {
                        "description": "What the auth manager is asked before a read or a change of colocation "
                                       "groups. 'airflow': read = the Plugins view, change = edit on Pools (works "
                                       "with every auth manager; FAB: Viewer reads, Op and Admin change). "
                                       "'colocation': the custom resource 'Colocation' (GET read, PUT change), for "
                                       "managers that define it.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "colocation",
                        "default": "airflow",
                    },
                    "metrics_token": {
                        "description": "A bearer token that lets a scraper (Prometheus) read /api/colocate/metrics "
                                       "and nothing else, without an Airflow user and without expiring (a token "
                                       "from POST /auth/token expires after [api_auth] jwt_expiration_time). At "
                                       "least 32 characters; empty: only Airflow users may scrape. Rotate it by "
                                       "changing it here and in the scraper's credentials file.",
                        "version_added": "0.3.0",
                        "type": "string",
                        "sensitive": True,
                        "example": "a-random-string-of-32-or-more-characters",
                        "default": "",
                    },
                },
            },
        },
        "extra-links": ["airflow_colocate.operators.links.ColocationLink", "airflow_colocate.operators.spark_ui.SparkHistoryLink"],
        "connection-types": [
            {
                "connection-type": "colocate",
                "hook-class-name": "airflow_colocate.hooks.catalog.ColocateCatalogHook",
                "hook-name": "Colocate catalog",
                "ui-field-behaviour": CONNECTION_FORM,
                "conn-fields": CONNECTION_FIELDS,
            }
        ],
    }
