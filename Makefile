# The few commands a newcomer needs; README.md and docs/getting-started.md explain them.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: run setup lint audit browser docs docs-check test test-fast bench openapi agents-latest clean

## Set everything up and serve on 127.0.0.1 (prints the URL and the token); serve creates or
## upgrades the database itself.
run: setup
	$(BIN)/agent-gateway serve

## Python packages into .venv, the pinned agent CLIs into agents/node_modules, the TypeScript
## SDK (clients/typescript) built, and the web console (console/) built into app/console/.
setup: $(VENV)/.installed agents/node_modules/.installed clients/typescript/dist/index.js \
	app/console/index.html

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# `npm install --no-save` rather than `npm ci`: the CLIs ship per-platform optional packages
# that npm leaves out of the lockfile for other platforms, which `npm ci` then rejects as
# out of sync. The versions still come from package.json (exact) and the lockfile.
agents/node_modules/.installed: agents/package.json agents/package-lock.json
	cd agents && npm install --no-save --no-audit --no-fund --loglevel=error
	touch $@

# The SDK and the console install exactly their lockfiles (`npm ci`: registry packages only).
clients/typescript/node_modules/.installed: clients/typescript/package.json clients/typescript/package-lock.json
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error
	touch $@

clients/typescript/dist/index.js: clients/typescript/node_modules/.installed clients/typescript/tsconfig.json $(wildcard clients/typescript/src/*.ts)
	cd clients/typescript && npm run --silent build
	touch $@

console/node_modules/.installed: console/package.json console/package-lock.json
	cd console && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Vite writes index.html, app.js and app.css into app/console/ (served at /console/).
app/console/index.html: console/node_modules/.installed clients/typescript/dist/index.js \
		console/vite.config.ts console/tsconfig.json $(shell find console/src -type f 2>/dev/null)
	cd console && npm run --silent build
	touch $@

## Ruff (lint and format), mypy --strict, the layers contract (import-linter) and the line
## budget (no module over 500 lines, no test module over 600).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_sizes.py

## The newest release of every pinned agent, in a scratch prefix, against the contract suite:
## one row per pinned package of agents/package.json and provider it serves, with the pinned
## and newest version, pass/fail (or why not run) and the protocol differences.
agents-latest: setup
	$(BIN)/python scripts/agents_latest.py

## Known advisories against the installed runtime dependencies (offline; see SECURITY.md).
audit: setup
	$(BIN)/python scripts/audit_deps.py

## Debian's Chromium for the browser tests (tests/browser drives it with Playwright), installed
## by scripts/system-packages.sh when it is missing (as root; otherwise it says how, and stops).
browser:
	scripts/system-packages.sh chromium

## The documentation site (docs/, mkdocs.yml) on http://127.0.0.1:8000, rebuilt on every save.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

## The generated reference pages are current (scripts/gen_docs.py --check), and the site builds
## with --strict (a broken link or anchor fails) into a scratch directory.
docs-check: setup
	$(BIN)/python scripts/gen_docs.py --check
	site=$$(mktemp -d) && trap 'rm -rf "$$site"' EXIT && \
		NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir "$$site"

## The whole suite: setup, lint, type checks, the dependency audit, the docs site, then every
## test (real CLIs and a real browser, loopback only).
test: lint audit docs-check browser
	scripts/run-tests.sh

## Unit and integration tests only (no real CLI).
test-fast: setup
	scripts/run-tests.sh tests/unit tests/integration

## Benchmarks against the real gateway (about 10 minutes; BENCH_ARGS=--quick for 2);
## results in docs/benchmarks.md, docs/benchmarks.json and docs/benchmarks.png.
bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

## Regenerate docs/openapi.json from the app (commit it with the API change), then the
## reference pages generated from it, the settings and the events (docs/reference/).
openapi: setup
	$(BIN)/python scripts/export_openapi.py
	$(BIN)/python scripts/gen_docs.py

clean:
	rm -rf $(VENV) agents/node_modules clients/typescript/node_modules clients/typescript/dist \
		clients/typescript/build-test console/node_modules console/build-test app/console \
		.mypy_cache .ruff_cache .pytest_cache site
