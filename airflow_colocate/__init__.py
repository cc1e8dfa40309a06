"""Doris/StarRocks-style colocation groups for Spark data lakes, run and scheduled by Airflow."""

from __future__ import annotations

__version__ = "0.1.0"


def get_provider_info() -> dict:
    """Airflow discovers the package through this entry point (``apache_airflow_provider``)."""
    return {
        "package-name": "airflow-colocate",
        "name": "Colocate",
        "description": "Colocation groups for Spark data lakes: bucketed, placed, repaired, joined without shuffle.",
        "versions": [__version__],
        "operators": [{"integration-name": "Colocate", "python-modules": [
            "airflow_colocate.operators.write", "airflow_colocate.operators.join", "airflow_colocate.operators.balance"]}],
        "sensors": [{"integration-name": "Colocate", "python-modules": ["airflow_colocate.sensors.stable"]}],
        "hooks": [{"integration-name": "Colocate", "python-modules": ["airflow_colocate.hooks.catalog"]}],
        "triggers": [{"integration-name": "Colocate", "python-modules": ["airflow_colocate.triggers.stable"]}],
        "asset-uris": [{"schemes": ["colocate"]}],
        "connection-types": [
            {
                "connection-type": "colocate",
                "hook-class-name": "airflow_colocate.hooks.catalog.ColocateCatalogHook",
            }
        ],
    }
