# icesink: `make demo` and `make test` work on a fresh machine (Python 3.11, Java 17).
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.icesink-installed

export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: env system-deps demo test test-fast lint format bench bench-upsert clean

env: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

system-deps:
	./scripts/install_system_deps.sh

demo: env
	$(PY) -m streaming_jobs.demo

test: env system-deps
	$(PY) -m pytest -q

test-fast: env
	$(PY) -m pytest -q tests/unit

lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: env
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: env
	$(PY) -m benchmarks.run

# Full size by default (10M rows, 100 x 100k changes: hours); smaller with e.g.
# make bench-upsert UPSERT_ARGS="--rows 100000 --batch-size 2000 --batches 4 --pyiceberg-batches 1"
UPSERT_ARGS ?=
bench-upsert: env
	$(PY) -m benchmarks.upsert $(UPSERT_ARGS)

clean:
	rm -rf $(VENV) demo-data .pytest_cache .mypy_cache .ruff_cache
