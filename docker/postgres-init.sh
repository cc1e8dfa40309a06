#!/usr/bin/env bash
# First start of the postgres service (/docker-entrypoint-initdb.d, run by the official image's
# entrypoint, which may source it): one database for Airflow's metadata, one for the colocation
# catalog, each owned by its own role, with the passwords the `secrets` service made.
set -eo pipefail
secrets="${COLOCATE_SECRETS:-/colocate/secrets}"
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
    -v airflow_pw="$(<"$secrets/airflow-db-password")" \
    -v colocate_pw="$(<"$secrets/colocate-db-password")" <<'SQL'
CREATE USER airflow WITH PASSWORD :'airflow_pw';
CREATE DATABASE airflow OWNER airflow;
CREATE USER colocate WITH PASSWORD :'colocate_pw';
CREATE DATABASE colocate OWNER colocate;
SQL
