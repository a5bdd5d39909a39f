# Two promises: `make demo` serves the seeded console; `make test` passes the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest distributed install core migrate clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The scheduling core compiled with mypyc into build/core (skipped while up to date, or when
# TIDEPOOL_PURE_CORE=1). jobs/scheduling uses the build only while it matches the sources.
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

clean:
	rm -rf $(VENV) build staticfiles tidepool.sqlite3
