# Weir: the two commands of the quick start are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_DIR ?= ./data

.PHONY: install run test lint proto bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

## run: install and start a single-node Weir (gateway 127.0.0.1:26500, monitoring :9600, data in ./data)
run: install
	$(VENV)/bin/weir start --data-dir $(DATA_DIR)

## test: install and run the linter and the whole test suite
test: install lint
	$(PY) -m pytest -q -p no:cacheprovider

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

## proto: regenerate the gRPC stubs from proto/*.proto
proto: install
	$(PY) proto/generate.py

## bench: benchmarks (print figures; they assert nothing)
bench: install
	$(PY) tests/bench/feel_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
