"""The ServiceAccounts may do exactly what the Kubernetes backend needs, and nothing more."""

from __future__ import annotations

import ast
from typing import Any

from .conftest import REPO, find, render

SA = ("tidepool", "tidepool")  # (namespace, name): the Celery workers, the control loop
WEB = ("tidepool", "tidepool-web")  # the web processes
CLUSTER = "*"
WORKSPACES = "workspace namespaces"
HOME = "tidepool"  # Tidepool's own namespace
# The control loop: get, list and watch nodes and pods; create, bind and delete pods, record
# events and read pod logs in the workspace namespaces. As
# (scope, apiGroup, resource, verb).
EXPECTED = {
    *((CLUSTER, "", "nodes", v) for v in ("get", "list", "watch")),
    *((CLUSTER, "", "pods", v) for v in ("get", "list", "watch")),
    (WORKSPACES, "", "pods", "create"),
    (WORKSPACES, "", "pods", "delete"),
    (WORKSPACES, "", "pods", "patch"),  # the tracking finalizer's removal
    (WORKSPACES, "", "pods/binding", "create"),
    (WORKSPACES, "", "events", "create"),
    (WORKSPACES, "", "events", "patch"),
    (WORKSPACES, "", "pods/log", "get"),
}
# The web processes: what a page does to a replica's pod (cancel, stop, logs), no more.
WEB_EXPECTED = {
    (WORKSPACES, "", "pods", "get"),
    (WORKSPACES, "", "pods", "delete"),
    (WORKSPACES, "", "pods/log", "get"),
}
# What each CoreV1Api call the backend makes needs; a new call fails the test until it is
# added here and to deploy/base/rbac.yaml.
NEEDS = {
    "list_node": {(CLUSTER, "", "nodes", "list")},
    "read_node": {(CLUSTER, "", "nodes", "get")},
    "create_namespaced_pod_binding": {(WORKSPACES, "", "pods/binding", "create")},
    "create_namespaced_event": {(WORKSPACES, "", "events", "create")},
    "list_pod_for_all_namespaces": {(CLUSTER, "", "pods", "list")},
    "read_namespaced_pod": {(WORKSPACES, "", "pods", "get")},
    "create_namespaced_pod": {(WORKSPACES, "", "pods", "create")},
    "delete_namespaced_pod": {(WORKSPACES, "", "pods", "delete")},
    "patch_namespaced_pod": {(WORKSPACES, "", "pods", "patch")},
    "read_namespaced_pod_log": {(WORKSPACES, "", "pods/log", "get")},
}
# The call wrapper's own attributes (api.py), not CoreV1Api methods.
WRAPPER = {"call", "json", "core", "limiter", "calls", "request_seconds"}
BACKEND = REPO / "jobs" / "backends" / "kubernetes"


def workspace_namespaces(objects: list[dict[str, Any]]) -> set[str]:
    return {
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Namespace" and o["metadata"]["name"] != "tidepool"
    }


def grants(objects: list[dict[str, Any]]) -> dict[tuple[str, str], set[tuple[str, ...]]]:
    """Every (scope, apiGroup, resource, verb) each ServiceAccount is granted, by binding."""
    roles = {
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")): o
        for o in objects
        if o["kind"] in ("ClusterRole", "Role")
    }
    out: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    for b in objects:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        scope = CLUSTER if b["kind"] == "ClusterRoleBinding" else b["metadata"]["namespace"]
        ref = b["roleRef"]
        ns = "" if ref["kind"] == "ClusterRole" else b["metadata"]["namespace"]
        role = roles[(ref["kind"], ref["name"], ns)]
        for subject in b["subjects"]:
            assert subject["kind"] == "ServiceAccount", subject
            who = (subject["namespace"], subject["name"])
            for rule in role["rules"]:
                assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no names/URLs
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            assert "*" not in (group, resource, verb), rule
                            out.setdefault(who, set()).add((scope, group, resource, verb))
    return out


def effective(objects: list[dict[str, Any]], who: tuple[str, str] = SA) -> set[tuple[str, ...]]:
    """A ServiceAccount's grants, a grant in every workspace namespace as one WORKSPACES."""
    spaces = workspace_namespaces(objects)
    by_scope: dict[tuple[str, ...], set[str]] = {}
    for scope, *rest in grants(objects)[who]:
        by_scope.setdefault(tuple(rest), set()).add(scope)
    out = set()
    for rest, scopes in by_scope.items():
        if CLUSTER in scopes:
            out.add((CLUSTER, *rest))
            scopes = scopes - {CLUSTER}
        if HOME in scopes:
            out.add((HOME, *rest))
            scopes = scopes - {HOME}
        if scopes:
            assert scopes == spaces, f"{rest} granted in {scopes}, workspaces are {spaces}"
            out.add((WORKSPACES, *rest))
    return out


def test_the_service_accounts_have_exactly_the_expected_rules(
    objects: list[dict[str, Any]],
) -> None:
    assert set(grants(objects)) == {SA, WEB}, "only Tidepool's two ServiceAccounts are bound"
    assert effective(objects) == EXPECTED
    assert effective(objects, WEB) == WEB_EXPECTED
    # Create and delete are never granted cluster-wide.
    for who in (SA, WEB):
        assert not {
            g for g in grants(objects)[who] if g[0] == CLUSTER and g[3] in ("create", "delete")
        }


def test_every_workspace_namespace_has_its_binding(objects: list[dict[str, Any]]) -> None:
    spaces = workspace_namespaces(objects)
    assert spaces, "the overlay lists at least one workspace namespace"
    template = find(objects, "ConfigMap", "tidepool-config")["data"]["TIDEPOOL_K8S_NAMESPACE"]
    prefix, _, suffix = template.partition("{workspace}")
    for ns in spaces:
        assert ns.startswith(prefix) and ns.endswith(suffix), ns
        for name in ("tidepool-workspace-pods", "tidepool-web-pods"):
            binding = find(
                [o for o in objects if o["metadata"].get("namespace") == ns], "RoleBinding", name
            )
            assert binding["roleRef"]["name"] == name


def test_only_the_processes_that_call_the_api_mount_a_token(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        spec = render.pod_spec(obj)
        if spec is None:
            continue
        name = obj["metadata"]["name"]
        if name in ("tidepool-web", "tidepool-worker"):
            account = {"tidepool-web": "tidepool-web", "tidepool-worker": "tidepool"}[name]
            assert spec["serviceAccountName"] == account
            assert spec["automountServiceAccountToken"] is True
        else:  # beat and the migration Job
            assert "serviceAccountName" not in spec
            assert spec["automountServiceAccountToken"] is False


def backend_calls() -> dict[str, set[str]]:
    """Each CoreV1Api method the backend uses (`….api.NAME`, `api.call("NAME")`, `api.core.NAME`),
    with `watch` if it is streamed."""
    calls: dict[str, set[str]] = {}
    for path in sorted(BACKEND.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in ("api", "core")
                and node.attr not in WRAPPER
            ):
                calls.setdefault(node.attr, set())
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "json")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                calls.setdefault(node.args[0].value, set())
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "stream"
                and node.args
                and isinstance(node.args[0], ast.Attribute)
            ):
                calls.setdefault(node.args[0].attr, set()).add("watch")
    return calls


def test_the_rules_cover_every_call_the_backend_makes(objects: list[dict[str, Any]]) -> None:
    calls = backend_calls()
    assert calls, f"no API calls found in {BACKEND}"
    unknown = set(calls) - set(NEEDS)
    assert not unknown, f"the backend calls {unknown}: add their RBAC rules"
    needed = set()
    for method, extra in calls.items():
        needed |= NEEDS[method]
        for verb in extra:
            needed |= {(scope, g, r, verb) for scope, g, r, _ in NEEDS[method]}
    granted = effective(objects)
    for scope, group, resource, verb in needed:
        assert (scope, group, resource, verb) in granted or (
            scope == WORKSPACES and (CLUSTER, group, resource, verb) in granted
        ), (scope, group, resource, verb)
    assert ("*", "", "pods", "watch") in needed  # the cache's watch was found


def test_no_other_module_talks_to_kubernetes() -> None:
    """The backend's package is the only user of the client, so the calls above are all."""
    users = set()
    for top in ("console", "cluster", "quotas", "workspaces", "jobs", "dashboard", "tools"):
        for path in (REPO / top).rglob("*.py"):
            text = path.read_text()
            if "import kubernetes" in text or "from kubernetes" in text:
                users.add(path.parent)
    assert users <= {BACKEND}, users - {BACKEND}


def test_rbac_file_lists_the_calls() -> None:
    text = (REPO / "deploy" / "base" / "rbac.yaml").read_text()
    for method in NEEDS:
        assert method in text, f"deploy/base/rbac.yaml does not explain {method}"
