"""The production overlay rendered once per session, by deploy/render.py and by kubectl."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAY = Path("overlays") / "production"


def load_deploy_module(name: str) -> Any:
    """deploy/NAME.py as a module (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", DEPLOY / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


render = load_deploy_module("render")


@pytest.fixture(scope="session")
def deploy_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/ copied, with the overlay's secret.env made from its example (as a user would)."""
    root = tmp_path_factory.mktemp("deploy") / "deploy"
    shutil.copytree(DEPLOY, root, ignore=shutil.ignore_patterns("secret.env", "__pycache__"))
    overlay = root / OVERLAY
    shutil.copy(overlay / "secret.env.example", overlay / "secret.env")
    return root


@pytest.fixture(scope="session")
def objects(deploy_copy: Path) -> list[dict[str, Any]]:
    """Every object of the production overlay, rendered by deploy/render.py."""
    return render.render(deploy_copy / OVERLAY)


@pytest.fixture(scope="session")
def kubectl_objects(deploy_copy: Path) -> list[dict[str, Any]]:
    """The same overlay rendered by `kubectl kustomize`, where kubectl is installed."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(deploy_copy / OVERLAY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The one object of that kind and name."""
    hits = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{len(hits)} objects {kind}/{name}"
    return hits[0]
