# Two promises: `make demo` serves the seeded console; `make test` passes the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest distributed install core migrate clean up down

# npm ci fetches the front-end packages of package-lock.json (plotly.js's partial bundle)
# into node_modules, which settings.STATICFILES_DIRS serves.
$(STAMP): pyproject.toml package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

install: $(STAMP)

# The scheduling core compiled with mypyc into build/core (skipped while up to date, or when
# TIDEPOOL_PURE_CORE=1). jobs.scheduling._loader.load() uses it only while it matches the sources.
core: install
	$(BIN)/python tools/build_core.py

migrate: install
	DJANGO_SETTINGS_MODULE=console.settings.local $(BIN)/python manage.py migrate --noinput

demo: migrate core
	DJANGO_SETTINGS_MODULE=console.settings.local $(BIN)/python manage.py seed_demo
	DJANGO_SETTINGS_MODULE=console.settings.local $(BIN)/python manage.py serve --port $(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy console cluster quotas workspaces jobs dashboard tools tidepool

# TIDEPOOL_EXPECT_COMPILED makes the core's build test fail if the compiled core is not in use.
# The second pass turns the speed layer off (TIDEPOOL_FAST_PATHS=0, console/fast): the stock
# ORM, serializers, SQLite backend and ASGI handler must pass the same tests. It runs what
# goes through those paths: API, pages, jobs and the control loop (every write meets the
# SQLite backend), workspaces, quotas, dashboard, the CLI over the API; and it skips
# tests/scheduling (the pure core: no database, no request), tests/browser (Chromium, slow,
# driving the views the page tests cover), the Kubernetes backend's tests (a fake API server;
# their writes are the control loop's, covered in tests/jobs) and the tests of the speed
# layer itself (test_fast_paths compares both ways in one run, test_statements forces it
# on). Measured with the switch off on 2 busy cores: the whole suite ~800 s of test time,
# this pass ~530 s of it.
FAST_PATHS_OFF := tests/api tests/jobs tests/quotas tests/workspaces tests/dashboard tests/cli \
	--ignore=tests/api/test_fast_paths.py --ignore=tests/api/test_statements.py \
	--ignore=tests/jobs/test_kubernetes_backend.py --ignore=tests/jobs/test_kubernetes_mapping.py
pytest: install core
	TIDEPOOL_EXPECT_COMPILED=1 $(BIN)/python -m pytest
	TIDEPOOL_FAST_PATHS=0 $(BIN)/python -m pytest $(FAST_PATHS_OFF)

# The distributed mode: real PostgreSQL, Redis, Celery worker and beat processes.
distributed: install core
	$(BIN)/python -m tests.distributed

test: lint typecheck pytest distributed

# The distributed stack on this machine, for trying it (tools/stack.py): PostgreSQL and Redis
# from the system packages, migrations and seed_demo, 2 web processes on ports 8000 and 8001,
# 2 Celery workers and beat. Data, logs and pids stay in .stack/; both are safe to repeat.
# STACK passes options, e.g. `make up STACK="--web 3 --port 9000"`.
STACK ?=
up: install core
	$(BIN)/python tools/stack.py up $(STACK)

# Standard library only: stops the stack without the virtualenv.
down:
	$(PYTHON) tools/stack.py down $(STACK)

clean:
	rm -rf $(VENV) build staticfiles tidepool.sqlite3
