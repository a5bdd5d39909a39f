# Two promises: `make demo` serves the seeded console; `make test` passes the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest distributed install core migrate clean up down

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
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
	$(BIN)/mypy console quotas workspaces jobs tools

# TIDEPOOL_EXPECT_COMPILED makes the core's build test fail if the compiled core is not in use.
pytest: install core
	TIDEPOOL_EXPECT_COMPILED=1 $(BIN)/python -m pytest

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
