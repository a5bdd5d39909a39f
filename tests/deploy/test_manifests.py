"""The deployment renders, every object is a valid Kubernetes object, and the pieces fit."""

from __future__ import annotations

import base64
import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from .conftest import REPO, find, render

API = kubernetes.client.ApiClient()
WORKLOADS = ("tidepool-web", "tidepool-worker", "tidepool-beat")


def model_name(obj: dict[str, Any]) -> str:
    """The official client's model for an object: apps/v1 Deployment -> V1Deployment."""
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    return version[0].upper() + version[1:] + obj["kind"]


def strict_parse(obj: dict[str, Any]) -> Any:
    """The object as the client's model; fails on an unknown kind, a missing required field,
    or any field the model does not know (the client drops those, so the round trip differs)."""
    name = model_name(obj)
    assert hasattr(kubernetes.client, name), f"{obj['kind']} ({obj['apiVersion']}): no model"
    model = API._ApiClient__deserialize(copy.deepcopy(obj), name)
    back = API.sanitize_for_serialization(model)
    assert back == obj, f"{name} {obj['metadata']['name']}: {_diff(obj, back)}"
    return model


def _diff(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            if a.get(k) != b.get(k):
                return _diff(a.get(k), b.get(k), f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _diff(x, y, f"{path}[{i}]")
    return f"{path or '.'}: {a!r} became {b!r}"


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = render.pod_spec(obj)
    assert spec is not None
    return spec


def test_every_object_parses_into_the_kubernetes_models(objects: list[dict[str, Any]]) -> None:
    kinds = {o["kind"] for o in objects}
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "ConfigMap",
        "Secret",
        "Deployment",
        "Job",
        "Service",
        "Ingress",
        "PodDisruptionBudget",
        "NetworkPolicy",
    } == kinds
    for obj in objects:
        strict_parse(obj)


def test_a_misspelt_field_or_unknown_kind_fails(objects: list[dict[str, Any]]) -> None:
    web = copy.deepcopy(find(objects, "Deployment", "tidepool-web"))
    web["spec"]["template"]["spec"]["containers"][0]["livenesProbes"] = {}
    with pytest.raises(AssertionError, match="livenesProbes"):
        strict_parse(web)
    with pytest.raises(AssertionError, match="no model"):
        strict_parse({"apiVersion": "v1", "kind": "Deplyoment", "metadata": {"name": "x"}})
    no_containers = copy.deepcopy(find(objects, "Job", "tidepool-migrate"))
    del no_containers["spec"]["template"]["spec"]["containers"]
    with pytest.raises(ValueError, match="containers"):
        strict_parse(no_containers)


@pytest.mark.parametrize("version", ["1.29", "latest"])
def test_every_object_validates_against_the_kubernetes_schema(
    objects: list[dict[str, Any]], version: str
) -> None:
    """Strict JSON-schema validation (types, enums, no unknown field) where the optional
    kubernetes-validate package is installed: the oldest Kubernetes supported and the newest."""
    kv = pytest.importorskip("kubernetes_validate")
    if version == "latest":
        version = kv.latest_version()
    for obj in objects:
        kv.validate(copy.deepcopy(obj), version, strict=True)


def test_render_matches_kubectl_kustomize(
    objects: list[dict[str, Any]], kubectl_objects: list[dict[str, Any]]
) -> None:
    def normal(objs: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, Any]]:
        out = {}
        for o in copy.deepcopy(objs):
            if o["kind"] == "Secret":  # kustomize wraps base64 lines
                o["data"] = {k: base64.b64decode(v).decode() for k, v in o["data"].items()}
            out[render.key(o)] = o
        return out

    assert normal(objects) == normal(kubectl_objects)


def test_render_refuses_what_it_does_not_do(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("namePrefix: x-\nresources: []\n")
    with pytest.raises(render.RenderError, match="namePrefix"):
        render.render(tmp_path)


def test_workloads(objects: list[dict[str, Any]]) -> None:
    web = find(objects, "Deployment", "tidepool-web")
    worker = find(objects, "Deployment", "tidepool-worker")
    beat = find(objects, "Deployment", "tidepool-beat")
    assert web["spec"]["replicas"] >= 2
    assert worker["spec"]["replicas"] >= 1
    # Exactly one beat, ever: two would fire every task twice.
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert web["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0

    commands = {
        name: pod_spec(find(objects, "Deployment", name))["containers"][0]["command"]
        for name in WORKLOADS
    }
    assert commands["tidepool-web"][:4] == ["python", "-m", "uvicorn", "console.asgi:application"]
    assert commands["tidepool-worker"][:6] == ["python", "-m", "celery", "-A", "console", "worker"]
    assert commands["tidepool-beat"][:6] == ["python", "-m", "celery", "-A", "console", "beat"]
    assert (
        "--scheduler=django_celery_beat.schedulers:DatabaseScheduler" in commands["tidepool-beat"]
    )
    migrate = pod_spec(find(objects, "Job", "tidepool-migrate"))["containers"][0]["command"]
    assert migrate == ["python", "manage.py", "migrate", "--noinput"]


def test_every_container_is_unprivileged_with_requests_and_the_image(
    objects: list[dict[str, Any]],
) -> None:
    images = set()
    for obj in objects:
        spec = render.pod_spec(obj)
        if spec is None:
            continue
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 10001
        for c in render.containers(obj):
            requests = c["resources"]["requests"]
            assert {"cpu", "memory"} <= set(requests), f"{obj['metadata']['name']}/{c['name']}"
            assert "memory" in c["resources"]["limits"]
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"] == {"drop": ["ALL"]}
            images.add(c["image"])
    assert images == {"registry.example.com/tidepool:0.1.0"}


def test_web_probes_service_pdb_and_ingress(objects: list[dict[str, Any]]) -> None:
    web = find(objects, "Deployment", "tidepool-web")
    labels = web["spec"]["template"]["metadata"]["labels"]
    container = pod_spec(web)["containers"][0]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    config = find(objects, "ConfigMap", "tidepool-config")["data"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] in port
        headers = {h["name"]: h["value"] for h in get["httpHeaders"]}
        # Django answers the probe itself, not with a 400 (host) or a 301 (HTTPS redirect).
        assert headers["Host"] in config["ALLOWED_HOSTS"].split(",")
        assert headers["X-Forwarded-Proto"] == "https"

    def selects(selector: dict[str, str]) -> bool:
        return selector.items() <= labels.items()

    service = find(objects, "Service", "tidepool-web")
    assert selects(service["spec"]["selector"])
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    assert "http" in port
    pdb = find(objects, "PodDisruptionBudget", "tidepool-web")
    assert selects(pdb["spec"]["selector"]["matchLabels"])
    assert pdb["spec"]["maxUnavailable"] < web["spec"]["replicas"]
    # No other workload is selected by the web Service or PDB.
    for name in ("tidepool-worker", "tidepool-beat"):
        other = find(objects, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert not service["spec"]["selector"].items() <= other.items()
        assert not pdb["spec"]["selector"]["matchLabels"].items() <= other.items()

    ingress = find(objects, "Ingress", "tidepool")
    rule = ingress["spec"]["rules"][0]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "tidepool-web", "port": {"name": "http"}}
    assert rule["host"] == ingress["spec"]["tls"][0]["hosts"][0]
    assert rule["host"] == config["ALLOWED_HOSTS"].split(",")[0]
    annotations = web["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == port["http"]


def test_each_worker_serves_its_own_metrics_where_prometheus_may_reach_them(
    objects: list[dict[str, Any]],
) -> None:
    """A worker's counters live in its own pod (multiprocess files are per pod): it serves
    them on the port its scrape annotation names, and its NetworkPolicy admits that port."""
    template = find(objects, "Deployment", "tidepool-worker")["spec"]["template"]
    container = template["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    annotations = template["metadata"]["annotations"]
    assert int(env["TIDEPOOL_WORKER_METRICS_PORT"]) == ports["metrics"]
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    policy = find(objects, "NetworkPolicy", "tidepool-worker")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert [p["port"] for rule in policy["ingress"] for p in rule["ports"]] == ["metrics"]


def test_network_policy(objects: list[dict[str, Any]]) -> None:
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    every = find(objects, "NetworkPolicy", "tidepool")
    assert every["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in every["spec"]  # nothing in, but what another policy lets in
    egress_ports = {p["port"] for rule in every["spec"]["egress"] for p in rule["ports"]}
    assert egress_ports == {53, 5432, 6379, 443, 6443}
    web = find(objects, "NetworkPolicy", "tidepool-web")
    assert [p["port"] for r in web["spec"]["ingress"] for p in r["ports"]] == ["http"]
    # Every Tidepool pod is covered by the egress policy; only web pods take connections.
    for obj in objects:
        if render.pod_spec(obj) is None:
            continue
        labels = (obj["spec"].get("template") or obj)["metadata"]["labels"]
        admitted = [
            p for p in policies if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        ]
        assert every in admitted
        assert (web in admitted) == (labels["app.kubernetes.io/component"] == "web")


def settings_env_names() -> set[str]:
    """Every environment variable console/settings reads through env() or env_bool()."""
    names = set()
    for path in (REPO / "console" / "settings").glob("*.py"):
        names |= set(re.findall(r"\benv(?:_bool)?\(\s*\"([A-Z0-9_]+)\"", path.read_text()))
    return names


def test_configuration_comes_from_the_configmap_and_secret(objects: list[dict[str, Any]]) -> None:
    config = find(objects, "ConfigMap", "tidepool-config")["data"]
    secret = find(objects, "Secret", "tidepool-secrets")["data"]
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "TIDEPOOL_METRICS_TOKEN"} == set(secret)
    assert not set(config) & set(secret)
    assert config["DJANGO_SETTINGS_MODULE"] == "console.settings.production"
    assert config["TIDEPOOL_RUNNER"] == "celery"
    assert config["TIDEPOOL_BACKEND"] == "kubernetes"
    # Every name is one the settings read (or the process itself: Django, prometheus_client),
    # so a typo cannot pass for a setting.
    outside = {"DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR"}
    unknown = (set(config) | set(secret)) - settings_env_names() - outside
    assert not unknown, f"not read by console/settings: {unknown}"
    for obj in objects:
        for c in render.containers(obj):
            refs = {next(iter(src)): src[next(iter(src))]["name"] for src in c.get("envFrom", [])}
            assert refs == {"configMapRef": "tidepool-config", "secretRef": "tidepool-secrets"}
    # The namespace template is the one the RoleBindings were made for.
    assert config["TIDEPOOL_K8S_NAMESPACE"] == "tidepool-{workspace}"


def test_metrics_dir_is_a_writable_volume(objects: list[dict[str, Any]]) -> None:
    path = find(objects, "ConfigMap", "tidepool-config")["data"]["PROMETHEUS_MULTIPROC_DIR"]
    for name in WORKLOADS:
        spec = pod_spec(find(objects, "Deployment", name))
        mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[mounts[path]]
        assert "emptyDir" in volumes[mounts["/tmp"]]


def test_pods_wait_for_the_migrations(objects: list[dict[str, Any]]) -> None:
    for name in WORKLOADS:
        init = pod_spec(find(objects, "Deployment", name))["initContainers"]
        assert [c["name"] for c in init] == ["wait-for-migrations"]
        assert "manage.py migrate --check" in init[0]["command"][-1]
    job = find(objects, "Job", "tidepool-migrate")
    assert job["spec"]["ttlSecondsAfterFinished"] > 0  # so the next apply can create it again


def test_secret_env_is_never_committed() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(
        ["git", "check-ignore", "-q", "deploy/overlays/production/secret.env"], cwd=REPO
    )
    assert done.returncode == 0, "secret.env is not ignored by git"
