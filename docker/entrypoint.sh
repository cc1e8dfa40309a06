#!/usr/bin/env bash
# ENTRYPOINT of the image (after tini), and the wrapper of the Airflow services' health checks
# (a health check does not pass through the ENTRYPOINT). For an Airflow container (POSTGRES_HOST
# set) it turns the secrets that the `secrets` service made at the stack's first start into
# Airflow's configuration, so no password or key is written in the image, compose.yaml or the repo:
# the metadata database URL, the colocation catalog's URL and connection, the JWT secret, the API
# secret key and the Fernet key. Then it runs the command.
set -euo pipefail

if [[ -n "${POSTGRES_HOST:-}" ]]; then
    secrets="${COLOCATE_SECRETS:-/colocate/secrets}"
    for name in airflow-db-password colocate-db-password airflow-jwt-secret airflow-api-secret-key airflow-fernet-key; do
        if [[ ! -s "$secrets/$name" ]]; then
            echo "entrypoint: $secrets/$name is missing or empty; the one-shot 'secrets' service makes it (docker compose up starts it first)" >&2
            exit 1
        fi
    done
    airflow_pw="$(<"$secrets/airflow-db-password")"
    colocate_pw="$(<"$secrets/colocate-db-password")"
    port="${POSTGRES_PORT:-5432}"
    export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql+psycopg2://airflow:${airflow_pw}@${POSTGRES_HOST}:${port}/airflow"
    export COLOCATE_CATALOG_URL="postgresql+psycopg2://colocate:${colocate_pw}@${POSTGRES_HOST}:${port}/colocate"
    # work_dir is where operators and Spark exchange plans and reports (on the shared volume).
    export AIRFLOW_CONN_COLOCATE_DEFAULT="{\"conn_type\": \"colocate\", \"host\": \"${POSTGRES_HOST}\", \"port\": ${port}, \"schema\": \"colocate\", \"login\": \"colocate\", \"password\": \"${colocate_pw}\", \"extra\": {\"work_dir\": \"${COLOCATE_HOME:-/colocate/home}/runs\"}}"
    AIRFLOW__API_AUTH__JWT_SECRET="$(<"$secrets/airflow-jwt-secret")"
    AIRFLOW__API__SECRET_KEY="$(<"$secrets/airflow-api-secret-key")"
    AIRFLOW__CORE__FERNET_KEY="$(<"$secrets/airflow-fernet-key")"
    export AIRFLOW__API_AUTH__JWT_SECRET AIRFLOW__API__SECRET_KEY AIRFLOW__CORE__FERNET_KEY
fi

exec "$@"
