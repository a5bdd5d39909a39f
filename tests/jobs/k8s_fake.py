"""A stand-in Kubernetes API server on loopback, for driving the real `kubernetes` client.

No kube-apiserver can run on the test machine (no registry serves one), so this speaks the
part of the REST API the backend uses, with the real paths, JSON shapes and refusals, as
strictly as the real server:
- pods: create (server defaults from the recorded `k8s_data/pod_created.json`, and 422 for a
  body the real validation refuses), read, delete (graceful, uid preconditions, finalizers
  keep a deleted pod until they are removed), JSON patch, and the eviction subresource;
- lists paginated with `limit`/`continue` (410 when the token's version is compacted, or a
  paginated list asks for a compacted resourceVersion);
- long-lived watches (`?watch=true`): chunked events as they happen until `timeoutSeconds`,
  BOOKMARKs only for `timeoutSeconds >= 3` (the real server gives a shorter watch none),
  `410 Gone` for a compacted resourceVersion (as an ERROR event, or the HTTP status), and
  streams broken on demand (an ERROR mid-stream, a reset, a chunk cut short);
- nodes (list, read), node deletion with PodGC, and a token that may only act in one namespace;
- the custom scheduler's calls: `pods/binding` (with the real server's refusals), core/v1
  Events, and field selectors on pod lists (`spec.nodeName!=`);
- pod logs as text (`tailLines`, `sinceSeconds`, `timestamps`; 400 while the container
  waits to start);
- faults injected per request: any status with its headers (429 with Retry-After), or an
  answer delayed past the client's timeout after the change was made.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"
DATA = Path(__file__).with_name("k8s_data")
TERMINAL = ("Succeeded", "Failed")
NOW = "2026-12-01T06:10:00Z"
# The real server's words when a paginated list outlived its snapshot.
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results."
)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
RESTART_POLICIES = ("Always", "OnFailure", "Never")


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    authorization: str


class PlainText(str):
    """A text/plain answer (a pod's log), not JSON."""


@dataclass
class Fault:
    """An answer forced on the next `times` requests matching method and path part."""

    method: str
    path_part: str
    code: int
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    message: str = ""
    delay: float = 0.0  # with code 0: do the request, then answer this many seconds late
    query_part: str = ""  # matched against the raw query string too
    compact: bool = False  # with code 0: compact the history first (continue tokens expire)


@dataclass
class Stream:
    """One open watch: where it is and how the test wants it broken."""

    since: int
    selector: str
    broken: str = ""  # "", "gone", "reset" or "truncate"


def _status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """A metav1.Status error body."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
        **extra,
    }


def _matches(obj: dict[str, Any], selector: str) -> bool:
    """Equality-based label selector: `a=b,c!=d`."""
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        if "!=" in term:  # as the real server: a pod without the label matches too
            name, _, value = term.partition("!=")
            if labels.get(name) == value:
                return False
            continue
        name, _, value = term.partition("=")
        if labels.get(name) != value:
            return False
    return True


def _selected(obj: dict[str, Any], selector: str) -> bool:
    """Field selector on spec.nodeName (`spec.nodeName=x`, `spec.nodeName!=`) and status.phase."""
    for term in filter(None, selector.split(",")):
        negate = "!=" in term
        name, _, value = term.replace("!=", "=").partition("=")
        path = {"spec.nodeName": ("spec", "nodeName"), "status.phase": ("status", "phase")}
        section, key = path[name]
        actual = (obj.get(section) or {}).get(key) or ""
        if (actual == value) == negate:
            return False
    return True


def recorded(name: str) -> dict[str, Any]:
    """A response recorded from a real API server (tests/jobs/k8s_data/<name>.json)."""
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return data


def _quantity_errors(path: str, values: dict[str, Any]) -> list[str]:
    return [
        f"{path}[{name}]: Invalid value: {value!r}: quantities must match the regular "
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        for name, value in values.items()
        if not isinstance(value, str) or not QUANTITY.match(value)
    ]


def validate(body: dict[str, Any]) -> list[str]:
    """The field errors the real API server's pod validation gives this body."""
    errors = []
    meta = body.get("metadata") or {}
    name = meta.get("name") or ""
    if not name:
        errors.append("metadata.name: Required value: name or generateName is required")
    elif len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        errors.append(
            f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must "
            "consist of lower case alphanumeric characters, '-' or '.'"
        )
    for value in (meta.get("labels") or {}).values():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            errors.append(
                f"metadata.labels: Invalid value: {value!r}: a valid label must be an empty "
                "string or consist of alphanumeric characters, '-', '_' or '.', and must be "
                "no more than 63 characters"
            )
    spec = body.get("spec") or {}
    containers = spec.get("containers") or []
    if not containers:
        errors.append("spec.containers: Required value")
    for i, c in enumerate(containers):
        path = f"spec.containers[{i}]"
        if not DNS_LABEL.match(c.get("name") or ""):
            errors.append(f"{path}.name: Required value")
        if not c.get("image"):
            errors.append(f"{path}.image: Required value")
        resources = c.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        errors += _quantity_errors(f"{path}.resources.requests", requests)
        errors += _quantity_errors(f"{path}.resources.limits", limits)
        for resource, value in requests.items():
            if "/" in resource and limits.get(resource) != value:
                errors.append(
                    f"{path}.resources.requests[{resource}]: Invalid value: {value!r}: must be "
                    f"equal to {resource} limit of {limits.get(resource, '0')}"
                )
    policy = spec.get("restartPolicy", "Always")
    if policy not in RESTART_POLICIES:
        errors.append(
            f'spec.restartPolicy: Unsupported value: "{policy}": supported values: '
            + ", ".join(f'"{p}"' for p in RESTART_POLICIES)
        )
    return errors


def _defaults(body: dict[str, Any]) -> None:
    """Fill in what the real server defaults, as the recorded created pod shows it."""
    template = recorded("pod_created")["spec"]
    spec = body.setdefault("spec", {})
    for k in (
        "restartPolicy",
        "terminationGracePeriodSeconds",
        "dnsPolicy",
        "serviceAccountName",
        "serviceAccount",
        "securityContext",
        "schedulerName",
        "tolerations",
        "priority",
        "enableServiceLinks",
        "preemptionPolicy",
    ):
        spec.setdefault(k, copy.deepcopy(template[k]))
    for c in spec.get("containers") or []:
        c.setdefault("resources", {})
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault(
            "imagePullPolicy", "Always" if c["image"].endswith(":latest") else "IfNotPresent"
        )
    body["status"] = {"phase": "Pending", "qosClass": "BestEffort", **(body.get("status") or {})}


@dataclass
class FakeCluster:
    """The server's state: pods, nodes, the watch history and every request it answered."""

    namespaces: set[str] | None = None  # None: every namespace exists
    gone_as_http_status: bool = False  # answer an expired watch with HTTP 410, not an event
    bookmarks: bool = True  # send BOOKMARKs to watches that allow them (and last >= 3 s)
    # tokens that may act only in one namespace: token -> namespace
    namespaced_tokens: dict[str, str] = field(default_factory=dict)
    version: int = 1000
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    keep_history: bool = True  # False: bulk loading, nobody watches yet
    compacted: int = 0
    faults: list[Fault] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    requests: list[Seen] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # core/v1 Events created
    binding_failures: int = 0  # answer this many bindings with 500, as a restarting server
    # What each pod's container printed: (when, line), oldest first.
    logs: dict[tuple[str, str], list[tuple[datetime, str]]] = field(default_factory=dict)
    lock: threading.Condition = field(default_factory=threading.Condition)
    closed: bool = False
    url: str = ""
    _order: tuple[list[tuple[str, str]], list[str]] | None = None

    # What tests do to the cluster.

    def write_log(self, namespace: str, name: str, text: str, at: datetime | None = None) -> None:
        """The pod's container prints a line (now, unless `at` says when)."""
        with self.lock:
            line = (at or datetime.now(UTC), text)
            self.logs.setdefault((namespace, name), []).append(line)

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str],
        gpus: str = "8",
        cpu: str = "128",
        memory: str = "1Ti",
        ready: bool = True,
        unschedulable: bool = False,
    ) -> None:
        """Add (or replace) a node."""
        with self.lock:
            self.version += 1
            self.nodes[name] = {
                "metadata": {"name": name, "labels": labels, "resourceVersion": str(self.version)},
                "spec": {"unschedulable": True} if unschedulable else {},
                "status": {
                    "allocatable": {"nvidia.com/gpu": gpus, "cpu": cpu, "memory": memory},
                    "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}],
                },
            }

    def put_pod(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create a pod directly, as another controller or a user would."""
        with self.lock:
            return self._create(obj["metadata"]["namespace"], obj)

    def set_status(self, namespace: str, name: str, **status: Any) -> None:
        """The kubelet reports: replace the pod's status (phase, reason, containerStatuses)."""
        with self.lock:
            pod = self.pods[namespace, name]
            pod["status"] = {**pod["status"], **status}
            self._record("MODIFIED", pod)
            self._reap(pod)

    def vanish(self, namespace: str, name: str) -> None:
        """The pod is force-deleted (termination finished, or garbage-collected with its node).

        A pod with finalizers stays, Failed if it had not ended, until they are removed.
        """
        with self.lock:
            self._force_delete(self.pods[namespace, name])

    def strip_finalizers(self, namespace: str, name: str) -> None:
        """Someone removes the pod's finalizers by hand (kubectl patch)."""
        with self.lock:
            pod = self.pods[namespace, name]
            pod["metadata"].pop("finalizers", None)
            self._record("MODIFIED", pod)
            self._reap(pod)

    def disrupt(self, namespace: str, name: str, reason: str, message: str) -> None:
        """A DisruptionTarget (kube-scheduler preemption, kubelet shutdown): the pod ends Failed."""
        with self.lock:
            pod = self.pods[namespace, name]
            self._condition(pod, reason, message)
            pod["status"]["phase"] = "Failed"
            self._force_delete(pod)

    def delete_node(self, name: str) -> None:
        """The node object is deleted: PodGC marks and force-deletes the pods bound to it."""
        with self.lock:
            del self.nodes[name]
            self.version += 1
            for pod in [p for p in self.pods.values() if p["spec"].get("nodeName") == name]:
                self._condition(pod, "DeletionByPodGC", "PodGC: node no longer exists")
                if pod["status"].get("phase") not in TERMINAL:
                    pod["status"]["phase"] = "Failed"
                self._force_delete(pod)

    def drain(self, node: str) -> None:
        """kubectl drain: cordon the node, then evict each pod on it (the eviction subresource)."""
        with self.lock:
            self.nodes[node]["spec"]["unschedulable"] = True
            for pod in [p for p in self.pods.values() if p["spec"].get("nodeName") == node]:
                self._evict(pod)

    def finish(self, namespace: str, name: str, *, code: int = 143) -> None:
        """The kubelet ends a terminating pod's container and reports its terminal phase."""
        with self.lock:
            pod = self.pods[namespace, name]
            if pod["status"].get("phase") not in TERMINAL:
                pod["status"]["phase"] = "Failed" if code else "Succeeded"
                state = {
                    "terminated": {"exitCode": code, "reason": "Error" if code else "Completed"}
                }
                pod["status"]["containerStatuses"] = [{"name": "main", "state": state}]
            self._record("MODIFIED", pod)
            self._reap(pod, kubelet=True)

    def inject(self, method: str, path_part: str, code: int, **kw: Any) -> Fault:
        """Force the next matching request(s) to answer `code` (0 with delay: answer late)."""
        fault = Fault(method, path_part, code, **kw)
        with self.lock:
            self.faults.append(fault)
        return fault

    def compact(self) -> None:
        """Forget the watch history: older resourceVersions and continue tokens answer 410."""
        with self.lock:
            self.version += 1  # etcd compacts at a revision past every older one
            self.compacted = self.version
            self.history.clear()

    def break_watches(self, how: str) -> None:
        """Break every open watch: "gone" (an ERROR 410 event), "reset" or "truncate"."""
        with self.lock:
            for stream in self.streams:
                stream.broken = how
            self.lock.notify_all()

    def latest(self, selector: str) -> int:
        """The resourceVersion of the last event a watch with this selector is sent."""
        with self.lock:
            found = [v for v, _, obj in self.history if _matches(obj, selector)]
            return max(found, default=0)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        """A pod as stored."""
        return self.pods[namespace, name]

    def seen(self, method: str, path_part: str = "") -> list[Seen]:
        """The requests with this method whose path contains `path_part`."""
        return [r for r in self.requests if r.method == method and path_part in r.path]

    # The API.

    def _record(self, kind: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if self.keep_history:
            self.history.append((self.version, kind, json.loads(json.dumps(obj))))
            self.lock.notify_all()

    def _pop(self, key: tuple[str, str]) -> dict[str, Any]:
        self._order = None
        return self.pods.pop(key)

    def _sorted(self) -> tuple[list[tuple[str, str]], list[str]]:
        """The pods' keys in the order the real server (etcd) lists them: namespace/name."""
        if self._order is None:
            ordered = sorted(self.pods, key="/".join)
            self._order = (ordered, ["/".join(k) for k in ordered])
        return self._order

    def _create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        body.update(kind="Pod", apiVersion="v1")
        meta = body["metadata"]
        meta.update(namespace=namespace, uid=str(uuid.uuid4()))
        meta["creationTimestamp"] = "2026-12-01T06:00:00Z"
        body.setdefault("spec", {})
        body.setdefault("status", {"phase": "Pending"})
        if (namespace, meta["name"]) not in self.pods:
            self._order = None
        self.pods[namespace, meta["name"]] = body
        self._record("ADDED", body)
        return body

    def _condition(self, pod: dict[str, Any], reason: str, message: str) -> None:
        conditions = pod["status"].setdefault("conditions", [])
        conditions.append(
            {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message}
        )

    def _evict(self, pod: dict[str, Any]) -> None:
        self._condition(pod, "EvictionByEvictionAPI", "Eviction API: evicting")
        self._graceful_delete(pod, pod["spec"].get("terminationGracePeriodSeconds", 30))

    def _graceful_delete(self, pod: dict[str, Any], grace: int) -> None:
        meta = pod["metadata"]
        if grace == 0 or pod["status"].get("phase") in TERMINAL or not pod["spec"].get("nodeName"):
            self._force_delete(pod)
            return
        # The kubelet now signals the container and waits up to `grace` seconds.
        meta.setdefault("deletionTimestamp", NOW)
        meta["deletionGracePeriodSeconds"] = grace
        self._record("MODIFIED", pod)

    def _force_delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if not meta.get("finalizers"):
            self._record("DELETED", self._pop((meta["namespace"], meta["name"])))
            return
        meta.setdefault("deletionTimestamp", NOW)
        meta["deletionGracePeriodSeconds"] = 0
        if pod["status"].get("phase") not in TERMINAL:
            pod["status"]["phase"] = "Failed"
        self._record("MODIFIED", pod)

    def _reap(self, pod: dict[str, Any], *, kubelet: bool = False) -> None:
        """A deleted pod goes once it has no finalizers and its containers have stopped."""
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return
        if (
            kubelet
            or pod["status"].get("phase") in TERMINAL
            or meta["deletionGracePeriodSeconds"] == 0
        ):
            key = (meta["namespace"], meta["name"])
            if key in self.pods:
                self._record("DELETED", self._pop(key))

    def _fault(self, method: str, path: str, query: str = "") -> Fault | None:
        for fault in self.faults:
            hit = fault.path_part in path and fault.query_part in query
            if fault.method == method and hit and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    def handle(self, method: str, url: str, body: Any, token: str = "") -> tuple[int, Any]:
        """Answer one request: (HTTP status, JSON body, or a watch Stream)."""
        parsed = urlparse(url)
        query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
        parts = parsed.path.strip("/").split("/")
        with self.lock:
            scope = self.namespaced_tokens.get(token)
            if method == "GET" and parsed.path == NODES:
                if scope is not None:
                    return 403, _forbidden("list", "nodes", None)
                items = list(self.nodes.values())
                return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}
            if method == "GET" and parsed.path == PODS:
                if scope is not None:
                    return 403, _forbidden("watch" if query.get("watch") else "list", "pods", None)
                return self._list_or_watch(query)
            if method == "GET" and parsed.path.startswith(NODES + "/"):
                return self._read_node(parts[3])
            if parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["events"]:
                return self._event(parts[3], body) if method == "POST" else (405, None)
            if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5 or parts[4] != "pods":
                return 404, _status(404, "NotFound", f"the server could not find {parsed.path}")
            namespace = parts[3]
            if scope is not None and scope != namespace:
                return 403, _forbidden(method.lower(), "pods", namespace)
            if self.namespaces is not None and namespace not in self.namespaces:
                return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found')
            if method == "POST" and len(parts) == 7 and parts[6] == "binding":
                return self._binding(namespace, parts[5], body)
            if method == "POST" and len(parts) == 5:
                return self._post(namespace, body)
            if method == "GET" and len(parts) == 7 and parts[6] == "log":
                return self._log(namespace, parts[5], query)
            pod = self.pods.get((namespace, parts[5])) if len(parts) >= 6 else None
            if pod is None:
                name = parts[5] if len(parts) >= 6 else ""
                return 404, _status(404, "NotFound", f'pods "{name}" not found')
            if method == "POST" and parts[6:] == ["eviction"]:
                self._evict(pod)
                return 201, _status(201, "", "", status="Success")
            if method == "GET":
                return 200, pod
            if method == "DELETE":
                return self._delete(pod, body or {})
            if method == "PATCH":
                return self._patch(pod, body or [])
        return 405, _status(405, "MethodNotAllowed", method)

    def _post(self, namespace: str, body: dict[str, Any]) -> tuple[int, Any]:
        name = (body.get("metadata") or {}).get("name", "")
        errors = validate(body)
        if errors:
            shown = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            causes = [{"message": e} for e in errors]
            details = {"name": name, "kind": "Pod", "causes": causes}
            return 422, _status(
                422, "Invalid", f'Pod "{name}" is invalid: {shown}', details=details
            )
        if (namespace, name) in self.pods:
            return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
        _defaults(body)
        return 201, self._create(namespace, body)

    def _list_or_watch(self, query: dict[str, str]) -> tuple[int, Any]:
        selector = query.get("labelSelector", "")
        if query.get("watch") != "true":
            return self._list(query, selector)
        since = int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            gone = _status(410, "Expired", f"too old resource version: {since} ({self.compacted})")
            if self.gone_as_http_status:
                return 410, gone
            return 200, Stream(since, selector, broken="gone")
        stream = Stream(since, selector)
        self.streams.append(stream)
        return 200, stream

    def _list(self, query: dict[str, str], selector: str) -> tuple[int, Any]:
        fields = query.get("fieldSelector", "")
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        version, start = self.version, ""
        if token:
            decoded = json.loads(base64.b64decode(token))
            version, start = decoded["rv"], decoded["start"]
            if version < self.compacted:
                return 410, _status(410, "Expired", CONTINUE_EXPIRED)
        asked = query.get("resourceVersion") or ""
        exact = query.get("resourceVersionMatch") == "Exact" or (limit and not token)
        if asked not in ("", "0") and exact and int(asked) < self.compacted:
            return 410, _status(
                410, "Expired", f"too old resource version: {asked} ({self.compacted})"
            )
        ordered, joined = self._sorted()
        first = bisect.bisect_right(joined, start) if start else 0
        keys = []
        for k in ordered[first:]:
            if _matches(self.pods[k], selector) and _selected(self.pods[k], fields):
                keys.append(k)
                if limit and len(keys) > limit:
                    break
        page = keys[:limit] if limit else keys
        meta: dict[str, Any] = {"resourceVersion": str(version)}
        if limit and len(keys) > limit:
            last = "/".join(page[-1])
            meta["continue"] = base64.b64encode(
                json.dumps({"v": "meta.k8s.io/v1", "rv": version, "start": last}).encode()
            ).decode()
        items = [self.pods[k] for k in page]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}

    def watch_events(self, stream: Stream, timeout: float, bookmarks: bool) -> Iterator[Any]:
        """The events of one watch as they happen: dicts, or "reset"/"truncate" to break it."""
        deadline = time.monotonic() + timeout
        sent = stream.since
        try:
            while True:
                with self.lock:
                    broken, fresh, wait = stream.broken, self._after(stream, sent), False
                    if not broken and not fresh:
                        left = deadline - time.monotonic()
                        if left <= 0 or self.closed:
                            break
                        self.lock.wait(min(left, 0.5))
                        wait = True
                if wait:
                    continue
                if broken == "gone":
                    gone = f"too old resource version: {sent} ({self.version})"
                    yield {"type": "ERROR", "object": _status(410, "Expired", gone)}
                    return
                if broken:
                    yield broken
                    return
                for v, kind, obj in fresh:
                    sent = v
                    yield {"type": kind, "object": obj}
            if bookmarks and self.bookmarks:
                meta = {"resourceVersion": str(self.version)}
                yield {
                    "type": "BOOKMARK",
                    "object": {"kind": "Pod", "apiVersion": "v1", "metadata": meta},
                }
        finally:
            with self.lock:
                if stream in self.streams:
                    self.streams.remove(stream)

    def _after(self, stream: Stream, sent: int) -> list[tuple[int, str, dict[str, Any]]]:
        return [
            (v, kind, obj)
            for v, kind, obj in self.history
            if v > sent and _matches(obj, stream.selector)
        ]

    def _log(self, namespace: str, name: str, query: dict[str, str]) -> tuple[int, Any]:
        """A pod's log as text (PlainText), with tailLines, sinceSeconds and timestamps."""
        pod = self.pods.get((namespace, name))
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        if pod["status"].get("phase") == "Pending":
            waiting = [
                (s.get("state") or {}).get("waiting") or {}
                for s in pod["status"].get("containerStatuses") or []
            ]
            why = next((w["reason"] for w in waiting if w.get("reason")), "ContainerCreating")
            message = f'container "main" in pod "{name}" is waiting to start: {why}'
            return 400, _status(400, "BadRequest", message)
        lines = self.logs.get((namespace, name), [])
        if "sinceSeconds" in query:
            since = datetime.now(UTC) - timedelta(seconds=int(query["sinceSeconds"]))
            lines = [(at, text) for at, text in lines if at >= since]
        if "tailLines" in query:
            lines = lines[max(len(lines) - int(query["tailLines"]), 0) :]
        stamped = query.get("timestamps") == "true"
        return 200, PlainText(
            "".join(
                f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {text}\n" if stamped else f"{text}\n"
                for at, text in lines
            )
        )

    # Node reads, bindings, events, field selectors and list pages (the custom scheduler's
    # calls), as the real API server answers them.

    def _read_node(self, name: str) -> tuple[int, Any]:
        node = self.nodes.get(name)
        if node is None:
            return 404, _status(404, "NotFound", f'nodes "{name}" not found')
        return 200, {"kind": "Node", "apiVersion": "v1", **node}

    def _binding(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST pods/{name}/binding: the checks of the API server's BindingREST."""
        if self.binding_failures:
            self.binding_failures -= 1
            return 500, _status(500, "InternalError", "etcdserver: request timed out")
        meta, target = body.get("metadata") or {}, body.get("target") or {}
        if meta.get("name") != name:
            return 400, _status(400, "BadRequest", "name in URL does not match name in Binding")
        if target.get("kind") not in (None, "", "Node") or not target.get("name"):
            message = f'Binding.core "{name}" is invalid: target: Invalid value'
            return 422, _status(422, "Invalid", message)
        pod = self.pods.get((namespace, name))
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        uid = meta.get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            message = (
                f'Operation cannot be fulfilled on pods "{name}": the UID in the precondition '
                f"({uid}) does not match the UID in record ({pod['metadata']['uid']}). "
                "The object might have been deleted and then recreated"
            )
            return 409, _status(409, "Conflict", message)
        if pod["spec"].get("nodeName"):
            message = (
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already '
                f'assigned to node "{pod["spec"]["nodeName"]}"'
            )
            return 409, _status(409, "Conflict", message)
        if pod["metadata"].get("deletionTimestamp"):
            message = f"pod {name} is being deleted, cannot be assigned to a host"
            return 500, _status(500, "InternalError", message)
        pod["spec"]["nodeName"] = target["name"]
        scheduled = {"type": "PodScheduled", "status": "True"}
        pod["status"]["conditions"] = [*pod["status"].get("conditions", []), scheduled]
        self._record("MODIFIED", pod)
        success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        return 201, {**success, "code": 201}

    def _event(self, namespace: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST events: kept for tests, with the fields the API server requires."""
        involved = body.get("involvedObject") or {}
        if involved.get("namespace", namespace) != namespace or not body.get("reason"):
            return 422, _status(422, "Invalid", "Event is invalid: involvedObject.namespace")
        self.events.append(body)
        return 201, body

    def _delete(self, pod: dict[str, Any], options: dict[str, Any]) -> tuple[int, Any]:
        meta = pod["metadata"]
        uid = (options.get("preconditions") or {}).get("uid")
        if uid is not None and uid != meta["uid"]:
            message = f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
            return 409, _status(409, "Conflict", message + meta["uid"])
        self._graceful_delete(pod, options.get("gracePeriodSeconds", 30))
        return 200, pod

    def _patch(self, pod: dict[str, Any], ops: list[dict[str, Any]]) -> tuple[int, Any]:
        """A JSON patch (RFC 6902) of the pod's metadata.finalizers: test, remove, add."""
        finalizers = list(pod["metadata"].get("finalizers") or [])
        for op in ops:
            path = op["path"]
            if not path.startswith("/metadata/finalizers"):
                return 422, _status(422, "Invalid", f"the stand-in patches no {path}")
            index = path.rsplit("/", 1)[1]
            if op["op"] == "test":
                if index.isdigit() and (
                    int(index) >= len(finalizers) or finalizers[int(index)] != op["value"]
                ):
                    return 422, _status(
                        422,
                        "Invalid",
                        "the server rejected our request due to "
                        "an error in our request: testing value failed",
                    )
            elif op["op"] == "remove":
                if not index.isdigit() or int(index) >= len(finalizers):
                    return 422, _status(422, "Invalid", "remove operation does not apply")
                finalizers.pop(int(index))
            elif op["op"] == "add":
                finalizers.append(op["value"])
        pod["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del pod["metadata"]["finalizers"]
        self._record("MODIFIED", pod)
        answer = copy.deepcopy(pod)
        self._reap(pod)
        return 200, answer


def _forbidden(verb: str, resource: str, namespace: str | None) -> dict[str, Any]:
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return _status(
        403,
        "Forbidden",
        f'{resource} is forbidden: User "system:serviceaccount:tidepool:tidepool" cannot '
        f'{verb} resource "{resource}" in API group "" {where}',
        details={"kind": resource},
    )


def _handler(cluster: FakeCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            parsed = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
            authorization = self.headers.get("Authorization", "")
            # as sent, whatever the server does to `body` next (defaults)
            sent = json.loads(raw) if raw else None
            cluster.requests.append(Seen(self.command, parsed.path, query, sent, authorization))
            with cluster.lock:
                fault = cluster._fault(self.command, parsed.path, parsed.query)
            if fault is not None and fault.compact:
                cluster.compact()
            if fault is not None and fault.code:
                message = fault.message or f"injected {fault.code}"
                self._answer(fault.code, _status(fault.code, fault.reason, message), fault.headers)
                return
            token = authorization.removeprefix("Bearer ")
            code, answer = cluster.handle(self.command, self.path, body, token)
            if fault is not None and fault.delay:
                time.sleep(fault.delay)  # the change is made; the answer comes too late
            if isinstance(answer, Stream):
                self._stream(answer, query)
                return
            self._answer(code, answer, {})

        def _answer(self, code: int, answer: Any, headers: dict[str, str]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(code)
            if isinstance(answer, PlainText):  # a pod's log
                data = answer.encode()
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_header("Content-Type", "application/json")
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up (its timeout)
                self.wfile.write(data)

        def _stream(self, stream: Stream, query: dict[str, str]) -> None:
            """A watch: one JSON event per line, chunk by chunk, as they happen."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            timeout = float(query.get("timeoutSeconds") or 1800)
            # The real server gives no bookmark to a watch shorter than 3 seconds.
            bookmarks = query.get("allowWatchBookmarks") == "true" and timeout >= 3
            try:
                for event in cluster.watch_events(stream, timeout, bookmarks):
                    if event == "reset":
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    line = json.dumps(event).encode() + b"\n"
                    if event == "truncate":
                        line = b'{"type": "MODIFIED", "object": {"kind": "Po'
                        self.wfile.write(f"{len(line) + 40:x}\r\n".encode() + line)
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                return  # the client went away
            self.close_connection = True

        do_GET = do_POST = do_DELETE = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    return Handler


class FakeApiServer:
    """The fake cluster served on 127.0.0.1 from a background thread."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cluster))
        self.server.daemon_threads = True
        cluster.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeCluster:
        self.thread.start()
        return self.cluster

    def __exit__(self, *exc: object) -> None:
        with self.cluster.lock:
            self.cluster.closed = True
            self.cluster.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, token: str) -> str:
        """A kubeconfig that points the client at this server."""
        return (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster:\n    server: {self.cluster.url}\n"
            f"users:\n- name: tester\n  user:\n    token: {token}\n"
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n"
        )
