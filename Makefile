# Weir: the two commands of the quick start are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_DIR ?= ./data

.PHONY: install run test test-collect test-all lint typecheck proto bench clean node-clients postgresql web browser npm test-packages

install: $(VENV)/.installed web

# uv installs the packages (about 15 s into an empty venv, where pip takes over a minute); pip only brings uv in.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(PY) install --quiet --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[dev]'
	touch $@

## run: install and start a single-node Weir (gateway 127.0.0.1:26500, monitoring :9600, data in ./data)
run: install
	$(VENV)/bin/weir start --data-dir $(DATA_DIR)

## test: install and run the linter and the test suite, in TEST_WORKERS processes (long fault, soak and many-seed
## runs, marked slow, are left out: make test-all runs them too)
TEST_WORKERS ?= 6
# Python may write its bytecode caches during the tests even where the environment says not to: every test process
# and every broker, gateway and CLI process a test starts would otherwise compile the sources again (half a second
# each, hundreds of times).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -p no:cacheprovider
# The installs, the linter and a first collection of the suite run side by side (the venv, then the linter and the
# collection, beside npm; the Debian packages first, once), then the tests.
test:
	@$(MAKE) --no-print-directory -j 4 lint test-collect node-clients postgresql browser
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile -m "not slow"

## test-collect: collect the suite once, so that the test processes, which all start at once, find every module
## compiled (their own assertion-rewritten test modules included) instead of each compiling them again (in a fresh
## clone, six of them took 77 s of CPU to start and collect, against 32 s with every module compiled)
test-collect: install
	$(PYTEST) --collect-only -m "not slow" > /dev/null

## test-all: make test, then the slow tests one at a time (each starts whole clusters or loads the machine itself)
test-all: test
	$(PYTEST) -m slow

## node-clients: zbctl, zeebe-node, @camunda8/sdk (8.8) and @camunda8/orchestration-cluster-api (8.9) from the npm
## registry, for the compatibility tests
NODE_CLIENTS := .cache/node-clients
node-clients: $(NODE_CLIENTS)/.installed

$(NODE_CLIENTS)/.installed: Makefile | npm
	mkdir -p $(NODE_CLIENTS)
	cd $(NODE_CLIENTS) && npm install --no-package-lock --ignore-scripts --no-audit --no-fund --silent \
		zbctl@8.4.1 zeebe-node@8.3.2 @camunda8/sdk@8.8.13 @camunda8/orchestration-cluster-api@9.1.5
	touch $@

## web: the BPMN viewer (bpmn-js from the npm registry) for the gateway's web view, copied into gateway/web/dist/vendor
WEB_CACHE := .cache/web
WEB_VENDOR := gateway/web/dist/vendor
BPMN_JS_VERSION := 18.31.1
web: $(WEB_VENDOR)/bpmn-viewer.js

# Without npm (and not root to install it) Weir still runs: the web view then says the diagram viewer is missing.
$(WEB_VENDOR)/bpmn-viewer.js: | npm
	@command -v npm >/dev/null || \
		{ echo "note: no npm: the web view will run without its diagram viewer (make web installs it)"; exit 0; }; \
	set -e; mkdir -p $(WEB_CACHE) $(WEB_VENDOR); \
	cd $(WEB_CACHE) && npm install --no-package-lock --ignore-scripts --no-audit --no-fund --silent bpmn-js@$(BPMN_JS_VERSION); \
	cd $(CURDIR) && cp $(WEB_CACHE)/node_modules/bpmn-js/dist/assets/diagram-js.css \
		$(WEB_CACHE)/node_modules/bpmn-js/dist/assets/bpmn-js.css $(WEB_VENDOR)/ && \
	cp $(WEB_CACHE)/node_modules/bpmn-js/dist/bpmn-viewer.production.min.js $@

## browser: Debian's chromium and playwright-core (npm) for the web view's browser test
BROWSER_CACHE := .cache/browser
browser: $(BROWSER_CACHE)/.installed

$(BROWSER_CACHE)/.installed: | test-packages
	mkdir -p $(BROWSER_CACHE)
	cd $(BROWSER_CACHE) && npm install --no-package-lock --ignore-scripts --no-audit --no-fund --silent playwright-core@1.65.1
	touch $@

## postgresql: Debian's PostgreSQL server binaries, for the history exporter tests (they start their own server)
postgresql: test-packages

# The Debian packages, each installed (as root) only when missing. Every apt-get of the Makefile is in these two
# targets, and test-packages comes after npm, so parallel installs (make -j, as make test runs them) never run two.
## npm: Debian's nodejs and npm (the web view's diagram viewer and the Node clients come from the npm registry)
npm:
	@command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; } || true

## test-packages: Debian's chromium (the web view's browser test) and postgresql (the history exporter tests)
test-packages: npm
	@missing=""; command -v chromium >/dev/null || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null || \
		missing="$$missing postgresql"; \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; }

## lint: ruff (lint and format), the layering contracts of [tool.importlinter] (lint-imports) and mypy
lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy

## typecheck: mypy alone over the packages ([tool.mypy] in pyproject.toml; also part of lint)
typecheck: install
	$(PY) -m mypy

## proto: regenerate the gRPC stubs from proto/*.proto
proto: install
	$(PY) proto/generate.py

## bench: benchmarks (print figures; they assert nothing)
bench: install
	$(PY) tests/bench/feel_bench.py
	$(PY) tests/bench/engine_bench.py --seconds 5 --runs 3
	$(PY) tests/bench/bench_runs.py --runs 3 --duration 10 --config default= --config no-exporter=--no-exporter
	$(PY) tests/bench/bench_runs.py --runs 3 --duration 10 --config no-exporter=--no-exporter -- --process ten-tasks
	$(PY) tests/bench/timer_bench.py --pending 100000 --due 20000 --runs 3
	$(PY) tests/bench/cluster_bench.py --runs 3 --duration 10 --concurrency 1000
	$(PY) tests/bench/overload_bench.py --seconds 60 --measure 10

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
