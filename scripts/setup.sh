#!/usr/bin/env bash
# Prepare a development/test environment for airflow-colocate. Idempotent, and fast when done.
#
#   scripts/setup.sh                  Java 17+, uv, .venv with requirements.lock + the project, the locality jar
#   scripts/setup.sh --with-postgres  ... and PostgreSQL server binaries for the integration tests
#   scripts/setup.sh --with-browser   ... and headless Chromium (+ fonts-liberation) for the browser test,
#                                     and Prometheus for the metrics scrape test
#   scripts/setup.sh --with-spark-lines  ... and every Spark line's virtualenv (pyspark, pyarrow, pandas) for the
#                                     line matrix's clusters (tests/spark_lines; first time: each line's ~750 MB,
#                                     about 3 min a line from uv's cache on a loaded 2-core machine)
#   scripts/setup.sh --with-s3        ... and hadoop-aws + the AWS SDK of the pinned Spark line in ~/.m2, and
#                                     hadoop-client-minicluster, for the tests on S3 and HDFS (tests/object_stores;
#                                     first time ~710 MB)
#
# Environment:
#   COLOCATE_PYTHON=/path/to/python3.11  interpreter for a new .venv (default: python3 if >= 3.11)
#   COLOCATE_APT_UPDATED=1                skip `apt-get update` (the caller has just run it; .ci/run does)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=$ROOT/.venv
STAMP=$VENV/.installed

with_postgres=0
with_browser=0
with_spark_lines=0
with_s3=0
for arg in "$@"; do
    case "$arg" in
        --with-postgres) with_postgres=1 ;;
        --with-browser) with_browser=1 ;;
        --with-spark-lines) with_spark_lines=1 ;;
        --with-s3) with_s3=1 ;;
        -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

say() { echo "setup: $*"; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }

can_apt() { [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; }

apt_updated=${COLOCATE_APT_UPDATED:-0}
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if [[ $apt_updated != 1 ]]; then
        say "apt-get update"
        apt-get update -qq
        apt_updated=1
    fi
    say "apt-get install $*"
    mkdir -p /usr/share/man/man1  # slim images drop it; openjdk's update-alternatives needs it
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- (a) Java 17+ ----------------------------------------------------------------------------
# PySpark launches $JAVA_HOME/bin/java when JAVA_HOME is set, else `java` from PATH.
java_bin() {
    if [[ -n ${JAVA_HOME:-} ]]; then echo "$JAVA_HOME/bin/java"; else command -v java || true; fi
}
java_major() {  # prints the major version of $1, or nothing
    local out ver
    out=$("$1" -version 2>&1) || return 0
    ver=$(sed -n 's/.* version "\([^"]*\)".*/\1/p' <<<"$out" | head -n1)
    ver=${ver#1.}            # 1.8.0_292 -> 8.0_292
    echo "${ver%%[!0-9]*}"   # 17.0.15 -> 17, 21 -> 21
}
JAVA_MSG="Java 17 is required by PySpark 4; install openjdk-17-jre-headless (Debian/Ubuntu) or set JAVA_HOME to a JDK 17, then re-run"
check_java() {
    local bin major
    bin=$(java_bin)
    [[ -n $bin && -x $bin ]] || return 1
    major=$(java_major "$bin")
    [[ -n $major && $major -ge 17 ]] || return 1
    say "java $major ($bin)"
}
if ! check_java; then
    if [[ -n ${JAVA_HOME:-} ]]; then
        die "JAVA_HOME=$JAVA_HOME does not hold Java 17 or newer. $JAVA_MSG"
    elif can_apt; then
        say "Java 17+ not found; installing openjdk-17-jre-headless"
        apt_install openjdk-17-jre-headless
        hash -r
        check_java || die "$JAVA_MSG"
    else
        die "$JAVA_MSG"
    fi
fi

# --- (b) uv ----------------------------------------------------------------------------------
find_uv() {
    if command -v uv >/dev/null 2>&1; then UV=(uv)
    elif [[ -x ${HOME:-/nonexistent}/.local/bin/uv ]]; then UV=("$HOME/.local/bin/uv")
    elif python3 -m uv --version >/dev/null 2>&1; then UV=(python3 -m uv)
    else return 1
    fi
}
if ! find_uv; then
    say "installing uv (pip install uv)"
    if ! python3 -m pip install --quiet uv 2>/dev/null; then
        # Debian's system Python refuses global installs (PEP 668): fall back to the user site.
        python3 -m pip install --quiet --user --break-system-packages uv \
            || die "could not install uv; install it (https://docs.astral.sh/uv/) and re-run"
    fi
    hash -r
    find_uv || die "uv was installed but cannot be found; add ~/.local/bin to PATH and re-run"
fi
say "uv $("${UV[@]}" --version | awk '{print $2}')"

# --- (c) + (d) .venv -------------------------------------------------------------------------
py_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

if [[ -x $VENV/bin/python && -f $STAMP && $STAMP -nt pyproject.toml && $STAMP -nt requirements.lock ]] \
    && py_ok "$VENV/bin/python"; then
    say ".venv is up to date ($("$VENV/bin/python" -V 2>&1))"
else
    if [[ -e $VENV || -L $VENV ]] && ! py_ok "$VENV/bin/python"; then
        say ".venv has no working Python >= 3.11; recreating it"
        rm -rf "$VENV"
    fi
    if [[ ! -e $VENV ]]; then
        python=${COLOCATE_PYTHON:-}
        if [[ -z $python ]] && command -v python3 >/dev/null 2>&1 && py_ok python3; then
            python=$(python3 -c 'import sys; print(sys.executable)')  # through pyenv shims
        fi
        say "creating .venv (${python:-a Python >= 3.11 found by uv})"
        "${UV[@]}" venv --quiet --python "${python:->=3.11}" "$VENV"
        py_ok "$VENV/bin/python" || die ".venv was created with $("$VENV/bin/python" -V 2>&1); Python >= 3.11 is required (set COLOCATE_PYTHON=...)"
    fi
    say "installing requirements.lock into .venv"
    "${UV[@]}" pip install --quiet --python "$VENV/bin/python" -r requirements.lock
    say "installing the project (editable, --no-deps)"
    "${UV[@]}" pip install --quiet --python "$VENV/bin/python" --no-deps -e .
    touch "$STAMP"
    say ".venv ready ($("$VENV/bin/python" -V 2>&1))"
fi

# --- (e) PostgreSQL server binaries ----------------------------------------------------------
pg_bin() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [[ -x $d/initdb && -x $d/pg_ctl ]] && { echo "$d"; return; }
    done
    d=$(command -v initdb 2>/dev/null || true)
    [[ -n $d ]] && dirname "$d"
    return 0
}
if [[ $with_postgres == 1 ]]; then
    if [[ -n $(pg_bin) ]]; then
        say "postgresql server binaries in $(pg_bin)"
    elif can_apt; then
        say "PostgreSQL server not found; installing postgresql (the Debian cluster is not started)"
        # Keep the package scripts from starting the default cluster; tests start their own.
        policy=/usr/sbin/policy-rc.d
        if [[ ! -e $policy ]]; then
            printf '#!/bin/sh\nexit 101\n' >"$policy"
            chmod 755 "$policy"
            trap 'rm -f "$policy"' EXIT
        fi
        apt_install postgresql
        if [[ $(trap -p EXIT) ]]; then rm -f "$policy"; trap - EXIT; fi
        [[ -n $(pg_bin) ]] || die "postgresql was installed but initdb/pg_ctl were not found"
        say "postgresql server binaries in $(pg_bin)"
    else
        say "WARNING: PostgreSQL server binaries (initdb, pg_ctl) not found."
        say "  install them with: sudo apt-get install postgresql   (or: sudo scripts/setup.sh --with-postgres)"
        say "  until then the PostgreSQL tests are skipped (they fail instead when CI=true)"
    fi
fi
# --- (e2) headless Chromium for the browser test ---------------------------------------------
# tests/plugins/test_browser.py drives the Colocation page in Debian's headless Chromium; without
# it that test is skipped (it fails instead when CI=true). .ci/run installs the same packages.
chromium_bin() {
    local name
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        command -v "$name" 2>/dev/null && return 0
    done
    return 0
}
if [[ $with_browser == 1 ]]; then
    if [[ -n $(chromium_bin) ]]; then
        say "chromium: $(chromium_bin)"
    elif can_apt; then
        say "Chromium not found; installing chromium and fonts-liberation (the browser test)"
        apt_install chromium fonts-liberation
        hash -r
        [[ -n $(chromium_bin) ]] || die "chromium was installed but is not on PATH"
        say "chromium: $(chromium_bin)"
    else
        say "WARNING: headless Chromium not found: tests/plugins/test_browser.py is skipped."
        say "  install it with: sudo apt-get install chromium fonts-liberation   (or: sudo scripts/setup.sh --with-browser)"
    fi
fi
# --- (e3) Prometheus for the metrics scrape test ---------------------------------------------
# tests/plugins/test_metrics.py starts Debian's prometheus on loopback to scrape /api/colocate/metrics;
# without it that test is skipped. .ci/run installs the same package.
if [[ $with_browser == 1 ]]; then
    if command -v prometheus >/dev/null 2>&1; then
        say "prometheus: $(command -v prometheus)"
    elif can_apt; then
        say "Prometheus not found; installing prometheus (the metrics scrape test)"
        apt_install prometheus
        hash -r
        command -v prometheus >/dev/null 2>&1 || die "prometheus was installed but is not on PATH"
    else
        say "WARNING: prometheus not found: tests/plugins/test_metrics.py is skipped."
        say "  install it with: sudo apt-get install prometheus   (or: sudo scripts/setup.sh --with-browser)"
    fi
fi

# --- (f) the locality jars, one per Spark line ------------------------------------------------
# A small Hadoop file system and Spark extension (java/colocate-locality) that run a bucket's task
# where its files are and read a bucket's sorted files in order. Compiled with javac once per
# supported Spark line (3.5, 4.0-4.3: airflow_colocate/core/spark_lines.py) against that line's own
# jars, by the same recipe a wheel build uses (build_support/locality_jar.py), into the package
# data folder where the installed package keeps them (git ignores them). Each line other than the
# pinned pyspark's comes from a virtualenv of its own holding that line's pyspark, built once with
# uv and cached under ~/.cache/airflow-colocate/spark-lines (the Spark-line tests start their
# clusters from the same ones). Without the jars jobs run, with no locality and no ordered read.
LOC_SRC=$ROOT/java/colocate-locality/src/main/java
LOC_DIR=$ROOT/airflow_colocate/jars
javac_bin() {
    if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/javac ]]; then echo "$JAVA_HOME/bin/javac"; else command -v javac || true; fi
}
jars_fresh() {
    local n
    n=$(ls "$LOC_DIR"/colocate-locality-spark*.jar 2>/dev/null | wc -l)
    [[ $n -ge 5 ]] || return 1
    [[ -z $(find "$LOC_SRC" build_support/locality_jar.py airflow_colocate/core/spark_lines.py \
              -newer "$(ls -t "$LOC_DIR"/colocate-locality-spark*.jar | tail -n1)") ]]
}
if jars_fresh; then
    say "locality jars are up to date ($LOC_DIR)"
else
    if [[ -z $(javac_bin) ]] && can_apt; then
        say "javac not found (only a JRE); installing openjdk-17-jdk-headless"
        apt_install openjdk-17-jdk-headless
        hash -r
    fi
    if [[ -z $(javac_bin) ]]; then
        say "WARNING: javac not found: the locality jars are not built (joins run without local reads)."
        say "  install a JDK 17 (sudo apt-get install openjdk-17-jdk-headless) and re-run"
    else
        say "building the locality jars, one per Spark line (first time: each line's pyspark is fetched once)"
        PATH="$(dirname "$(command -v "${UV[0]}" 2>/dev/null || echo /usr/bin/uv)"):$PATH" \
            "$VENV/bin/python" build_support/locality_jar.py >/dev/null || die "the locality jars did not build (see above)"
        say "built $(ls "$LOC_DIR"/colocate-locality-spark*.jar | wc -l) locality jars in $LOC_DIR"
    fi
fi

# --- (g) the Spark lines' virtualenvs, for the line matrix (--with-spark-lines) ----------------
# The matrix (tests/spark_lines) starts a cluster of every line from that line's virtualenv, whose
# workers also need pyarrow and pandas: built here, so a fresh machine downloads them before the
# tests start and not inside a test's time limit. Cached like the jars' (the same virtualenvs).
if [[ $with_spark_lines == 1 ]]; then
    say "the Spark lines' virtualenvs for the line matrix (first time: each line's pyspark is fetched once)"
    PATH="$(dirname "$(command -v "${UV[0]}" 2>/dev/null || echo /usr/bin/uv)"):$PATH" \
        "$VENV/bin/python" build_support/spark_lines_env.py --workers >/dev/null \
        || die "a Spark line's virtualenv did not build (see above)"
    # Iceberg's Spark runtime for the 4.1 line (bench/iceberg_way.py's pin): tests/iceberg reads a
    # published table with Spark's own Iceberg reader; ~40 MB from Maven Central, SHA-1 checked
    "$VENV/bin/python" -c "import sys; sys.path[:0] = ['build_support', 'bench']
import iceberg_way, s3_jars; s3_jars.fetch(*iceberg_way.RUNTIME.split(':'))" \
        || die "Iceberg's Spark runtime did not download (see above)"
fi
# --- (h) hadoop-aws and the AWS SDK for s3a:// backends (--with-s3) ----------------------------
# pyspark ships no hadoop-aws; a job on S3 backends ships the one of its Spark line's Hadoop
# (airflow_colocate/spark/object_stores.py). Fetched once from Maven Central into ~/.m2 (~650 MB
# for the pinned line: the AWS SDK bundle). The S3 server of the tests comes with requirements.lock.
if [[ $with_s3 == 1 ]]; then
    say "hadoop-aws and the AWS SDK for the pinned Spark line (first time: ~650 MB from Maven Central)"
    # with the Spark lines, 3.5's too (Hadoop 3.3.4, the AWS SDK v1 bundle, ~280 MB): the line
    # matrix keeps 3.5's backends on the tests' S3 API (tests/spark_lines/line_matrix.py, S3_LINES)
    lines=$("$VENV/bin/python" -c "from airflow_colocate.spark.locality import local_line; print(local_line())")
    [[ $with_spark_lines == 1 ]] && lines="$lines 3.5"
    "$VENV/bin/python" build_support/s3_jars.py $lines --minicluster || die "hadoop-aws did not download (see above)"
fi
say "done"
