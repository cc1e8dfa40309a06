#!/usr/bin/env bash
# Airflow's metadata database for the demo in $AIRFLOW_HOME, and an airflow.cfg that names
# ${AIRFLOW_HOME} instead of the folder it was written in (Airflow writes absolute paths for the
# metadata database, logs and plugins; it expands ${AIRFLOW_HOME} when it reads them), so a copy
# of the demo home, with AIRFLOW_HOME pointed at the copy, runs on the copy only.
set -euo pipefail
: "${AIRFLOW_HOME:?set AIRFLOW_HOME}"
airflow="${AIRFLOW_BIN:-$(dirname "$0")/../.venv/bin/airflow}"
"$airflow" db migrate
cfg=$(<"$AIRFLOW_HOME/airflow.cfg")
printf '%s\n' "${cfg//"$AIRFLOW_HOME"/'${AIRFLOW_HOME}'}" >"$AIRFLOW_HOME/airflow.cfg"
