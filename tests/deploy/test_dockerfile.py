"""The Dockerfile and its build context, checked without a Docker daemon.

What can be checked here: two stages on the same Python as the project's, an unprivileged
user matching the pods' securityContext, every COPY source present in the build context
(after .dockerignore), nothing secret or machine-built in it, the core compiled and checked
in the build stage, and the commands the image and the pods run importable.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from typing import Any

import pytest

from .conftest import REPO, find, load_deploy_module, render

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending
    return out


def stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions, by its name (FROM image AS name)."""
    out: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for word, rest in instructions():
        if word == "FROM":
            m = re.fullmatch(r"(\S+) AS (\w+)", rest)
            assert m, f"every stage is named: FROM {rest}"
            current = out.setdefault(m.group(2), [("FROM", m.group(1))])
        elif current is not None:
            current.append((word, rest))
    return out


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per .dockerignore line, with Docker's matching (**, *, ?)."""
    out = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif pattern.startswith("**", i):
                regex += ".*"
                i += 2
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        out.append((negated, re.compile(regex)))
    return out


def in_context(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker sends `path` (relative to the repo) to the build."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negated, regex in patterns:
        if negated == excluded and any(regex.fullmatch(p) for p in prefixes):
            excluded = not negated
    return not excluded


def tracked_files() -> list[str]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def test_two_stages_on_the_projects_python() -> None:
    s = stages()
    assert list(s) == ["build", "runtime"]
    assert s["build"][0] == s["runtime"][0] == ("FROM", "${PYTHON_IMAGE}")
    arg = next(rest for word, rest in instructions() if word == "ARG")
    image = arg.partition("=")[2]
    m = re.fullmatch(r"python:(3\.\d+)-slim(?:-\w+)?", image)
    assert m, image
    # The same minor version as the project's Python: the compiled core's ABI is the runtime's.
    assert m.group(1) == f"{sys.version_info.major}.{sys.version_info.minor}"
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11" and m.group(1) >= "3.11"


def test_runtime_runs_as_the_pods_unprivileged_user(objects: list[dict[str, Any]]) -> None:
    runtime = stages()["runtime"]
    users = [rest for word, rest in runtime if word == "USER"]
    assert users == ["10001:10001"]
    last_user = max(i for i, (word, _) in enumerate(runtime) if word == "USER")
    assert all(word != "RUN" for word, _ in runtime[last_user:]), "nothing runs as root after"
    for obj in objects:
        spec = render.pod_spec(obj)
        if spec is not None:
            assert spec["securityContext"]["runAsUser"] == 10001
            assert spec["securityContext"]["runAsGroup"] == 10001


def test_build_stage_compiles_and_checks_the_core() -> None:
    runs = " ".join(rest for word, rest in stages()["build"] if word == "RUN")
    assert "tools/build_core.py" in runs
    assert "core_status()" in runs and "'compiled'" in runs
    assert "deploy/requirements.py runtime" in runs and "deploy/requirements.py core" in runs
    assert "collectstatic --noinput" in runs
    copies = [rest for word, rest in stages()["runtime"] if word == "COPY"]
    assert "--from=build /app /app" in copies  # build/core and staticfiles come along
    assert "--from=build /opt/venv /opt/venv" in copies
    # The core lands where jobs.scheduling._loader looks for it, beside the sources.
    from jobs.scheduling import _loader

    assert _loader.BUILD == REPO / "build" / "core"


def test_requirements_come_from_pyproject() -> None:
    requirements = load_deploy_module("requirements")
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert requirements.requirements("runtime") == data["project"]["dependencies"]
    core = requirements.requirements("core")
    assert (
        core[0].startswith("mypy==") and core[0] in data["project"]["optional-dependencies"]["test"]
    )
    assert core[1:] == data["build-system"]["requires"]


def test_every_copy_source_is_in_the_build_context() -> None:
    patterns = dockerignore_patterns()
    files = tracked_files()
    for stage in stages().values():
        for word, rest in stage:
            if word not in ("COPY", "ADD") or rest.startswith("--from"):
                continue
            assert word == "COPY"
            *sources, _dest = rest.split()
            for source in sources:
                if source == ".":
                    continue
                assert (REPO / source).exists(), source
                assert in_context(source, patterns), f"{source} is in .dockerignore"
    # The whole application goes in: every tracked file of the packages, templates, static,
    # the core's build script, and manage.py.
    sent = {f for f in files if in_context(f, patterns)}
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {p.rstrip("*") for p in include["packages"]["find"]["include"]}
    needed = {
        f
        for f in files
        if f.split("/")[0] in packages | {"templates", "static"}
        and "/migrations/" not in f  # checked just below, by name
    }
    needed |= {"manage.py", "pyproject.toml", "tools/build_core.py", "deploy/requirements.py"}
    needed |= {f for f in files if "/migrations/" in f}
    assert needed <= sent, sorted(needed - sent)[:10]


def test_context_leaves_out_secrets_and_machine_builds() -> None:
    patterns = dockerignore_patterns()
    for path in (
        ".git/config",
        ".venv/bin/python",
        "build/core/sources.sha256",
        "build/core/jobs/scheduling/_core__mypyc.cpython-311-x86_64-linux-gnu.so",
        "staticfiles/admin/css/base.css",
        "tidepool.sqlite3",
        "tidepool.sqlite3-wal",
        ".stack/config.json",
        "deploy/overlays/production/secret.env",
        "deploy/overlays/production/kustomization.yaml",
        "jobs/__pycache__/models.cpython-311.pyc",
        "tests/conftest.py",
        ".env",
    ):
        assert not in_context(path, patterns), path
    for path in ("console/asgi.py", "jobs/scheduling/classify.py", "deploy/requirements.py"):
        assert in_context(path, patterns), path


def test_image_and_pods_run_the_same_web_command(objects: list[dict[str, Any]]) -> None:
    cmd = json.loads(next(rest for word, rest in stages()["runtime"] if word == "CMD"))
    web = render.pod_spec(find(objects, "Deployment", "tidepool-web"))
    assert web is not None
    assert web["containers"][0]["command"] == cmd
    runtime_env = " ".join(rest for word, rest in stages()["runtime"] if word == "ENV")
    assert "DJANGO_SETTINGS_MODULE=console.settings.production" in runtime_env
    assert "PATH=/opt/venv/bin:$PATH" in runtime_env
    assert "HOME=/tmp" in runtime_env  # the user has no home; /tmp is an emptyDir in the pods


def test_the_commands_import_under_production_settings() -> None:
    """What the image's CMD, the workers, beat and the migration Job start, loads here."""
    script = (
        "import uvicorn, uvloop, httptools\n"
        "import console.asgi\n"
        "from console.celery import app\n"
        "assert app.main == 'tidepool'\n"
        "import django_celery_beat.schedulers\n"
        "from django.core.management import get_commands, load_command_class\n"
        "migrate = load_command_class(get_commands()['migrate'], 'migrate')\n"
        "assert '--check' in migrate.create_parser('manage.py', 'migrate').format_help()\n"
        "print('ok')\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("TIDEPOOL_")
    }
    env |= {"DJANGO_SETTINGS_MODULE": "console.settings.production", "SECRET_KEY": "test-only"}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
