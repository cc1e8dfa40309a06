#!/usr/bin/env bash
# The one-shot `secrets` service of docker/compose.yaml: the demo's secrets are made here, on the
# first start of a stack, into the `secrets` volume, and never again (a restart keeps them, so the
# database passwords and the Fernet key stay valid). Nothing secret is in the image or the repo.
#
#   postgres-password      the PostgreSQL superuser's (POSTGRES_PASSWORD_FILE)
#   airflow-db-password    role `airflow`, owner of Airflow's metadata database
#   colocate-db-password   role `colocate`, owner of the colocation catalog
#   airflow-jwt-secret, airflow-api-secret-key, airflow-fernet-key
#
# The three database passwords are 0644: the postgres container reads them as its own user
# (uid 999), not as airflow; the volume is mounted only into this stack's containers. The Airflow
# UI passwords are made by Airflow itself (SimpleAuthManager) on the API server's first start, into
# $COLOCATE_SECRETS/passwords.json, and printed in its log.
set -euo pipefail
umask 077
secrets="${COLOCATE_SECRETS:-/colocate/secrets}"
mkdir -p "$secrets"
chmod 0755 "$secrets"

token() { python -c 'import secrets; print(secrets.token_hex(24))'; }
fernet() { python -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())'; }

# new NAME GENERATOR MODE: create $secrets/NAME once, atomically (a half-written secret is never seen).
new() {
    if [[ -s "$secrets/$1" ]]; then
        echo "secrets: $1 kept"
        return
    fi
    local tmp
    tmp="$(mktemp "$secrets/.$1.XXXXXX")"
    "$2" >"$tmp"
    chmod "$3" "$tmp"
    mv "$tmp" "$secrets/$1"
    echo "secrets: $1 created"
}

new postgres-password token 0644
new airflow-db-password token 0644
new colocate-db-password token 0644
new airflow-jwt-secret token 0600
new airflow-api-secret-key token 0600
new airflow-fernet-key fernet 0600
