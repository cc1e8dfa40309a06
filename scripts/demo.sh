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
run table create orders --columns "o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice decimal(15,2), o_orderdate date, o_orderpriority string, o_clerk string, o_shippriority int, o_comment string, dt date" \
    --distributed-by o_orderkey --buckets 8 --replication 2 --partition-by dt --colocate-with g_tpch

step "4. Create lineitem in the same group: key names differ, the key type (bigint) must not"
run table create lineitem --columns "l_orderkey bigint, l_partkey bigint, l_suppkey bigint, l_linenumber int, l_quantity decimal(15,2), l_extendedprice decimal(15,2), l_discount decimal(15,2), l_tax decimal(15,2), l_returnflag string, l_linestatus string, l_shipdate date, l_commitdate date, l_receiptdate date, l_shipinstruct string, l_shipmode string, l_comment string, dt date" \
    --distributed-by l_orderkey --buckets 8 --replication 2 --partition-by dt --colocate-with g_tpch

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

export AIRFLOW_HOME="$COLOCATE_HOME/airflow" AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags" AIRFLOW__CORE__LOAD_EXAMPLES=False
export COLOCATE_LANDING="$COLOCATE_HOME/landing" SPARK_LOCAL_IP=127.0.0.1
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'
# COLOCATE_DEMO_DATES="2026-11-01" COLOCATE_DEMO_ONLY_DAG_RUNS=1: steps 1-8 for those days only (the
# test that reads the DAG logs a demo leaves runs it so)
read -r -a DATES <<<"${COLOCATE_DEMO_DATES:-2026-11-01 2026-11-02 2026-11-03}"

step "8. Three daily runs of dags/colocate_tpch_daily.py (land -> load orders and lineitem -> wait stable -> colocated join)"
scripts/demo_airflow_home.sh >"$COLOCATE_HOME/airflow-db.log" 2>&1
for d in "${DATES[@]}"; do
  printf '$ airflow dags test colocate_tpch_daily %s   (log: %s)\n' "$d" "$COLOCATE_HOME/dag-$d.log"
  .venv/bin/airflow dags test colocate_tpch_daily "$d" >"$COLOCATE_HOME/dag-$d.log" 2>&1 || { tail -40 "$COLOCATE_HOME/dag-$d.log"; exit 1; }
  # the operators' own summary lines: what each load committed, and the join's explain
  grep -a "\[airflow.task.operators.airflow_colocate" "$COLOCATE_HOME/dag-$d.log" \
    | grep -aE "colocate: (committed|join 1:|  colocate:|bucket join:)" \
    | sed -E 's/^.*\] (colocate: .*[^ ]) +\[airflow\.task\.operators.*$/  \1/'
done
run table show orders
run show group g_tpch
[[ -n "${COLOCATE_DEMO_ONLY_DAG_RUNS:-}" ]] && exit 0

step "9. The join over all three days: colocated, no Exchange under the join"
.venv/bin/python scripts/demo_join.py --expect true "${DATES[@]}"

step "10. Backend be2 goes down: the same join falls back to a shuffle join, and says why"
run backend mark-down be2 --reason "demo: disk pulled"
.venv/bin/python scripts/demo_join.py --expect false "${DATES[@]}"

step "11. Repair: relocate be2's buckets to the other backends (clone, switch the map, mark stable)"
COLOCATE_RELOCATE_DELAY_MINUTES=0 run balance
run show groups
run show group g_tpch

step "12. The join is colocated again"
.venv/bin/python scripts/demo_join.py --expect true "${DATES[@]}"

step "13. be2's disk is back: mark it up, so the one-replica revenue_by_priority's partitions on it are readable again"
run backend mark-up be2 --reason "demo: disk back"
run backend list

printf '\nDone. Catalog, backends and Airflow home are under %s; try: .venv/bin/colocate --help\n' "$COLOCATE_HOME"

# The same DAGs under a real scheduler: the environment above, with the catalog named by the
# colocate connection (as a deployment does) instead of the COLOCATE_HOME fallback.
cat <<EOF

Run the same DAGs under a real scheduler (api-server, scheduler, dag-processor, triggerer):

  cd $PWD
  export COLOCATE_HOME=$COLOCATE_HOME   # or a copy of it: everything below follows
  export AIRFLOW_HOME=\$COLOCATE_HOME/airflow COLOCATE_LANDING=\$COLOCATE_HOME/landing SPARK_LOCAL_IP=127.0.0.1
  export AIRFLOW__CORE__DAGS_FOLDER=$AIRFLOW__CORE__DAGS_FOLDER AIRFLOW__CORE__LOAD_EXAMPLES=False
  export AIRFLOW_CONN_SPARK_DEFAULT='$AIRFLOW_CONN_SPARK_DEFAULT'
  export AIRFLOW_CONN_COLOCATE_DEFAULT="{\\"conn_type\\": \\"colocate\\", \\"extra\\": {\\"catalog_url\\": \\"sqlite:///\$COLOCATE_HOME/catalog.db\\"}}"
  .venv/bin/airflow dags list --local   # colocate_maintenance and colocate_tpch_daily, no import errors
  .venv/bin/airflow standalone          # http://localhost:8080, user admin; password in $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated

Then unpause colocate_tpch_daily (or trigger it for a date) and trigger colocate_maintenance from its
form; the Colocation page is in Airflow's navigation. See README.md, "Run the example DAGs under a real scheduler".
EOF
