#!/usr/bin/env bash
# The main job end to end on embedded defaults: a SQLite catalog and three backends in local
# folders under .demo/ (removed and rebuilt on every run, so the story is always the same).
set -euo pipefail
cd "$(dirname "$0")/.."
export COLOCATE_HOME="${COLOCATE_HOME:-$PWD/.demo}"
unset COLOCATE_CATALOG_URL
colocate=".venv/bin/colocate"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ colocate %s\n' "$*"; "$colocate" "$@"; }

rm -rf "$COLOCATE_HOME"
mkdir -p "$COLOCATE_HOME"/backends/{be1,be2,be3}

step "1. Initialise the catalog (embedded SQLite at $COLOCATE_HOME/catalog.db)"
run init

step "2. Register three storage backends (local folders, each its own host)"
for i in 1 2 3; do run backend add "file://$COLOCATE_HOME/backends/be$i" --name "be$i" --capacity 10G; done
run backend list

step "3. Create orders: its distribution founds colocation group g_tpch (the parent table)"
run table create orders --columns "o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice decimal(15,2), o_orderdate date, o_orderpriority string" \
    --distributed-by o_orderkey --buckets 8 --replication 2 --partition-by o_orderdate --colocate-with g_tpch

step "4. Create lineitem in the same group: key names differ, the key type (bigint) must not"
run table create lineitem --columns "l_orderkey bigint, l_linenumber int, l_quantity decimal(15,2), l_extendedprice decimal(15,2), l_shipdate date, l_commitdate date, l_receiptdate date, l_shipmode string" \
    --distributed-by l_orderkey --buckets 8 --replication 2 --partition-by l_shipdate --colocate-with g_tpch

step "5. A table that does not fit the group schema is refused, and says why"
printf '$ colocate table create customer ... --buckets 16 --colocate-with g_tpch\n'
if "$colocate" table create customer --columns "c_custkey int, c_name string" --distributed-by c_custkey \
    --buckets 16 --replication 2 --colocate-with g_tpch; then
  echo "demo: expected a refusal" >&2; exit 1
fi

step "6. SHOW PROC '/colocation_group'"
run show groups

step "7. SHOW PROC '/colocation_group/<id>': bucket seq -> backends (same for every table of the group)"
run show group g_tpch

printf '\nDone. Catalog and backends are under %s; try: .venv/bin/colocate --help\n' "$COLOCATE_HOME"
