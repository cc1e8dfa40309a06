# Entry points for people and CI. `make test` is what .ci/run (and the README) runs.
SHELL := /bin/bash
PYTHON := .venv/bin/python
PYTEST_ARGS ?=
# The suite runs on two worker processes (pytest-xdist), whole test files each: half its time is
# waiting (JVM and spark-submit start-up, Airflow runs), so two share two cores well. Files go out
# in the order tests/conftest.py gives (longest first), not xdist's most-tests-first.
TEST_WORKERS ?= 2

.PHONY: setup demo test bench clean nemesis

setup:
	bash scripts/setup.sh

demo: setup
	bash scripts/demo.sh

test:
	bash scripts/setup.sh --with-postgres --with-browser --with-spark-lines --with-s3
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

bench: setup
	@set -e; shopt -s nullglob; benches=(bench/bench_*.py); \
	if [ $${#benches[@]} -eq 0 ]; then echo "bench: no bench/bench_*.py found" >&2; exit 1; fi; \
	for b in "$${benches[@]}"; do echo "== $$b"; $(PYTHON) "$$b"; done

# Randomized schedules of concurrent work and faults against a model (tests/nemesis/; root: it mounts
# tmpfs backends). SEED=… STEPS=… replays one exactly; no SEED runs successive seeds for DURATION
# seconds (from seed FROM=…, else one taken from the clock). POSTGRES=1 puts the catalog on PostgreSQL and adds its restart and its link cut (the workers reach it from a network namespace) to the faults.
SEED ?=
STEPS ?= 12
DURATION ?= 1800
POSTGRES ?=
nemesis:
	bash scripts/setup.sh $(if $(POSTGRES),--with-postgres)
	$(PYTHON) tests/nemesis/nemesis_run.py --steps $(STEPS) $(if $(SEED),--seed $(SEED),--duration $(DURATION) $(if $(FROM),--seed $(FROM))) $(if $(POSTGRES),--postgres)

clean:
	rm -rf .venv .demo
