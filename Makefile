# Entry points for people and CI. `make test` is what .ci/run (and the README) runs.
SHELL := /bin/bash
PYTHON := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test bench clean

setup:
	bash scripts/setup.sh

demo: setup
	bash scripts/demo.sh

test:
	bash scripts/setup.sh --with-postgres
	$(PYTHON) -m pytest $(PYTEST_ARGS)

bench: setup
	@set -e; shopt -s nullglob; benches=(bench/bench_*.py); \
	if [ $${#benches[@]} -eq 0 ]; then echo "bench: no bench/bench_*.py found" >&2; exit 1; fi; \
	for b in "$${benches[@]}"; do echo "== $$b"; $(PYTHON) "$$b"; done

clean:
	rm -rf .venv .demo
