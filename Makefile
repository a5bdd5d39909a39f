# Two promises: `make demo` serves the seeded console; `make test` passes the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest distributed install migrate clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

migrate: install
	DJANGO_SETTINGS_MODULE=console.settings.local $(BIN)/python manage.py migrate --noinput

demo: migrate
	DJANGO_SETTINGS_MODULE=console.settings.local $(BIN)/python manage.py seed_demo
	DJANGO_SETTINGS_MODULE=console.settings.local $(BIN)/python manage.py serve --port $(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy console quotas workspaces jobs

pytest: install
	$(BIN)/python -m pytest

# The distributed mode: real PostgreSQL, Redis, Celery worker and beat processes.
distributed: install
	$(BIN)/python -m tests.distributed

test: lint typecheck pytest distributed

clean:
	rm -rf $(VENV) staticfiles tidepool.sqlite3
