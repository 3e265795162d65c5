# Two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := .tools/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
FLASK := $(VENV)/bin/flask --app wsgi
VENDOR := static/vendor

.PHONY: run test setup extras eval lint format bench soak migrate-check clean browser fuzz scorecard

setup: $(VENV)/.installed $(VENDOR)/.installed

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: requirements.lock $(UV)
	[ -x $(PY) ] || $(UV) venv --quiet --python $(PYTHON) $(VENV)
	$(UV) pip sync --quiet --compile-bytecode --python $(PY) --require-hashes requirements.lock
	rm -f $(VENV)/.extras
	touch $@

# The optional extras (pyproject.toml: evals, scorecard) on top, at the same versions:
# the suite, `flask eval` and `make scorecard` need them; `make run` does not.
extras: $(VENV)/.extras
$(VENV)/.extras: $(VENV)/.installed requirements-extras.lock
	$(UV) pip install --quiet --compile-bytecode --python $(PY) --require-hashes -r requirements-extras.lock
	touch $@

# htmx and its websocket extension come from the npm registry, pinned by package-lock.json,
# and are served from our own origin (never a CDN).
$(VENDOR)/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	mkdir -p $(VENDOR)
	cp node_modules/htmx.org/dist/htmx.min.js $(VENDOR)/htmx.min.js
	cp node_modules/htmx-ext-ws/dist/ws.js $(VENDOR)/ws.js
	touch $@

# One process: migrations, the demo seed, then gunicorn with one gevent worker (make_run.py).
run: setup
	$(PY) make_run.py

# Debian's Chromium for the browser tests; Playwright never downloads a browser here.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The suite on TEST_WORKERS processes (pytest-xdist); PYTEST_ARGS come last and win, e.g.
# PYTEST_ARGS="-n 0 tests/web" for one process. --dist loadfile: a module's tests run on one
# worker, one after another, so a module-scoped server (tests/browser/test_screens.py) is
# built once and the scale tests' processes never run two deployments at once.
# (loadgroup's xdist_group marks are ignored under pytest 9.2: xdist 3.8 renames
# item._nodeid, which pytest 9.2 no longer reads.)
TEST_WORKERS ?= 2
PYTEST_XDIST = -n $(TEST_WORKERS) --dist loadfile

test: setup extras browser
	$(VENV)/bin/pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The property-based tests at length: every route and form (tests/web/test_fuzz_routes.py,
# FUZZ_EXAMPLES generated requests; the suite makes 150) and the JSON API against its
# OpenAPI document (Schemathesis); no per-test timeout.
FUZZ_EXAMPLES ?= 20000
fuzz: setup
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(VENV)/bin/pytest -q -p no:cacheprovider --timeout=0 tests/web/test_fuzz_routes.py
	SCHEMATHESIS_EXAMPLES=500 $(VENV)/bin/pytest -o addopts="" -q tests/web/test_openapi.py

# Style, the layers of app/ (the import contracts in pyproject.toml; docs/architecture.md)
# and its types (mypy: [tool.mypy] in pyproject.toml, strict where the run's logic lives).
lint: setup extras
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Every benchmark (under 10 minutes), then docs/benchmarks.md and its plots.
# BENCH_ARGS passes options, e.g. BENCH_ARGS="--only serving --variants minimal,gunicorn".
bench: setup
	$(PY) -m bench $(BENCH_ARGS)

# The soak (bench/soak/): SOAK_MINUTES of steady mixed traffic driven by Locust on make
# run's server and then on the scaled-out one (PostgreSQL, Redis, Dramatiq); 0 errors, p99,
# memory, open files and connections flat, or it fails. Writes docs/benchmarks.md "Soak".
SOAK_MINUTES ?= 30
SOAK_ARGS ?=
soak: setup extras
	$(PY) -m bench.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

# The capability evals (evals/*.yaml) against the configured model (ANTHROPIC_API_KEY or
# ANTHROPIC_BASE_URL); EVAL_ARGS passes options, e.g. EVAL_ARGS="evals/safety.yaml --repeat 3".
EVAL_ARGS ?=
eval: setup extras
	$(FLASK) eval $(EVAL_ARGS)

# AgentDojo's prompt-injection suites through Loopdesk's own gate (scorecard/, about 20
# minutes), then the table in docs/security.md. SCORECARD_ARGS passes options, e.g.
# SCORECARD_ARGS="--suites banking,slack --limit 5" or "--model NAME" with ANTHROPIC_API_KEY.
scorecard: setup extras
	$(PY) -m scorecard --write-doc $(SCORECARD_ARGS)

# Regenerate the lock after editing pyproject.toml.
lock: $(UV)
	$(UV) pip compile pyproject.toml --group dev --generate-hashes --python-version 3.11 -o requirements.lock
	$(UV) pip compile pyproject.toml --group dev --all-extras --generate-hashes --python-version 3.11 \
	  -c requirements.lock -o requirements-extras.lock

clean:
	rm -rf $(VENV) .tools node_modules $(VENDOR)
