# syntax=docker/dockerfile:1
# Tidepool's image: the web processes (uvicorn), the Celery workers and beat, and the migration
# Job all run it (deploy/base). Build and push it:
#   docker build -t registry.example.com/tidepool:0.1.0 . && docker push registry.example.com/tidepool:0.1.0
#
# Two stages on the same Python image, so the compiled core's ABI is the runtime's:
#   build    installs the dependencies into /opt/venv, compiles the scheduling core with mypyc
#            (tools/build_core.py, as `make core`) into /app/build/core with a separate
#            toolchain venv, collects the static files and byte-compiles the sources;
#   runtime  copies /opt/venv and /app, and runs as an unprivileged user (uid 10001).
# The project runs from its source tree (/app): jobs.scheduling._loader takes build/core only
# while its stamp matches the sources beside it.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# The dependencies first, from pyproject.toml alone, so a source change reuses this layer.
COPY pyproject.toml ./
COPY deploy/requirements.py deploy/requirements.py
RUN python deploy/requirements.py runtime > /tmp/runtime.txt \
    && python deploy/requirements.py core > /tmp/core.txt \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install -r /tmp/runtime.txt \
    && python -m venv /opt/core-toolchain \
    && /opt/core-toolchain/bin/pip install -r /tmp/core.txt
COPY . .
# The compiled core; the build fails unless jobs.scheduling._loader will take it.
RUN /opt/core-toolchain/bin/python tools/build_core.py \
    && python -c "import sys; sys.path.insert(0, '.'); from jobs.scheduling import _loader; s = _loader.core_status(); print('core:', s); sys.exit(s != 'compiled')" \
    && rm -rf build/core-c
# Static files (whitenoise serves them, hashed and compressed); production settings need a
# secret key to load, never used here.
RUN SECRET_KEY=collectstatic-only DJANGO_SETTINGS_MODULE=console.settings.production \
    /opt/venv/bin/python manage.py collectstatic --noinput \
    && /opt/venv/bin/python -m compileall -q -j 0 console cluster quotas workspaces jobs dashboard manage.py

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    DJANGO_SETTINGS_MODULE=console.settings.production
RUN groupadd --system --gid 10001 tidepool \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
       --shell /usr/sbin/nologin tidepool
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
USER 10001:10001
EXPOSE 8000
# The web process; the workers, beat and the migration Job set their own command.
CMD ["python", "-m", "uvicorn", "console.asgi:application", "--host=0.0.0.0", "--port=8000", \
     "--loop=uvloop", "--http=httptools", "--ws-per-message-deflate=false", "--proxy-headers", \
     "--forwarded-allow-ips=*", "--timeout-graceful-shutdown=20", "--no-access-log"]
