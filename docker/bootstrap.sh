#!/usr/bin/env bash
# Runs before the Airflow API server starts (docker/compose.yaml): migrate Airflow's metadata
# database, create or upgrade the colocation catalog, and register the three backends (one named
# volume each, mounted at the same path in every Airflow and Spark container). Idempotent, so a
# restart of the stack changes nothing. The API server listens on [api] port
# (AIRFLOW__API__PORT in compose.yaml).
set -euo pipefail

backends="${COLOCATE_BACKENDS:-/colocate/backends}"
airflow db migrate
colocate init
for be in be1 be2 be3; do
    if colocate backend list --json | python -c "import json, sys; sys.exit(0 if any(b['Name'] == '$be' for b in json.load(sys.stdin)) else 1)"; then
        echo "bootstrap: backend $be already registered"
    else
        colocate backend add "file://$backends/$be" --name "$be" --capacity "${COLOCATE_BACKEND_CAPACITY:-100G}"
    fi
done
exec airflow api-server
