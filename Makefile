# The two commands that matter: `make demo` and `make test`. Each builds .venv
# from nothing when it is missing, so a fresh clone needs no other step.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format bench docs services clean browser

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[all,dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m integrations.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The site, into site/; --strict turns a broken link or anchor into a failure
# (the suite runs the same build: tests/docs/test_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The dashboard's browser tests drive Debian's chromium (never a downloaded one).
browser:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# Every benchmark, in the order of benchmarks/__main__.py, then the targets table
# (docs/benchmarks.md says how long it takes). The `bench` extra brings AWS
# Powertools for the Redis comparison.
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[all,dev,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks

services:
	bash scripts/services.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
