"""A stand-in Kubernetes API server on loopback, for driving the real `kubernetes` client.

No kube-apiserver can run on the test machine (no registry serves one), so this speaks the
small part of the REST API the backend uses, with the real paths and JSON shapes: list, read,
create and delete pods; list nodes; watch pods (`?watch=true`, newline-delimited events in a
chunked response from a resourceVersion, with bookmarks if asked); pod logs (text, with
tailLines, sinceSeconds and timestamps, 400 while the container waits); and `410 Gone` for a
resourceVersion older than its compacted history, either as an ERROR event (what a real
server sends) or as the HTTP status.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"


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


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1.Status error body."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _matches(obj: dict[str, Any], selector: str) -> bool:
    """Equality-based label selector: `a=b,c=d`."""
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
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


@dataclass
class FakeCluster:
    """The server's state: pods, nodes, the watch history and every request it answered."""

    namespaces: set[str] | None = None  # None: every namespace exists
    gone_as_http_status: bool = False  # answer an expired watch with HTTP 410, not an event
    bookmarks: bool = False  # end each watch with a BOOKMARK at the current resourceVersion
    version: int = 1000
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    compacted: int = 0
    requests: list[Seen] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # core/v1 Events created
    binding_failures: int = 0  # answer this many bindings with 500, as a restarting server
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    # What each pod's container printed: (when, line), oldest first.
    logs: dict[tuple[str, str], list[tuple[datetime, str]]] = field(default_factory=dict)

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

    def vanish(self, namespace: str, name: str) -> None:
        """The pod is removed (termination finished, or garbage-collected with its node)."""
        with self.lock:
            self._record("DELETED", self.pods.pop((namespace, name)))

    def compact(self) -> None:
        """Forget the watch history: older resourceVersions now answer 410 Gone."""
        with self.lock:
            self.compacted = self.version
            self.history.clear()

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
        self.history.append((self.version, kind, json.loads(json.dumps(obj))))

    def _create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        body.update(kind="Pod", apiVersion="v1")
        meta = body["metadata"]
        meta.update(namespace=namespace, uid=str(uuid.uuid4()))
        meta["creationTimestamp"] = "2026-12-01T06:00:00Z"
        body.setdefault("status", {"phase": "Pending"})
        self.pods[namespace, meta["name"]] = body
        self._record("ADDED", body)
        return body

    def handle(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        """Answer one request: (HTTP status, JSON body, or a list of watch events)."""
        parsed = urlparse(url)
        query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
        parts = parsed.path.strip("/").split("/")
        with self.lock:
            if method == "GET" and parsed.path == NODES:
                items = list(self.nodes.values())
                return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}
            if method == "GET" and parsed.path == PODS:
                return self._list_or_watch(query)
            if method == "GET" and parsed.path.startswith(NODES + "/"):
                return self._read_node(parts[3])
            if parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["events"]:
                return self._event(parts[3], body) if method == "POST" else (405, None)
            if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5 or parts[4] != "pods":
                return 404, _status(404, "NotFound", f"the server could not find {parsed.path}")
            namespace = parts[3]
            if self.namespaces is not None and namespace not in self.namespaces:
                return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found')
            if method == "POST" and len(parts) == 7 and parts[6] == "binding":
                return self._binding(namespace, parts[5], body)
            if method == "POST" and len(parts) == 5:
                name = body["metadata"]["name"]
                if (namespace, name) in self.pods:
                    return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
                return 201, self._create(namespace, body)
            if method == "GET" and len(parts) == 7 and parts[6] == "log":
                return self._log(namespace, parts[5], query)
            pod = self.pods.get((namespace, parts[5])) if len(parts) == 6 else None
            if pod is None:
                return 404, _status(404, "NotFound", f'pods "{parts[-1]}" not found')
            if method == "GET":
                return 200, pod
            if method == "DELETE":
                return self._delete(pod, body or {})
        return 405, _status(405, "MethodNotAllowed", method)

    def _list_or_watch(self, query: dict[str, str]) -> tuple[int, Any]:
        selector = query.get("labelSelector", "")
        if query.get("watch") != "true":
            items = [p for p in self.pods.values() if _matches(p, selector)]
            meta = {"resourceVersion": str(self.version)}
            items = [p for p in items if _selected(p, query.get("fieldSelector", ""))]
            return 200, self._page(items, meta, query)
        since = int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            gone = _status(410, "Expired", f"too old resource version: {since} ({self.compacted})")
            if self.gone_as_http_status:
                return 410, gone
            return 200, [{"type": "ERROR", "object": gone}]
        events = [
            {"type": kind, "object": obj}
            for version, kind, obj in self.history
            if version > since and _matches(obj, selector)
        ]
        if self.bookmarks and query.get("allowWatchBookmarks") == "true":
            meta = {"resourceVersion": str(self.version)}
            events.append({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": meta}})
        return 200, events

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

    def _page(
        self, items: list[dict[str, Any]], meta: dict[str, Any], query: dict[str, str]
    ) -> dict[str, Any]:
        """One page of a list: `limit` items from `continue` (an offset here)."""
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        rest = len(items) - start - limit
        if rest > 0:
            meta = {**meta, "continue": str(start + limit), "remainingItemCount": rest}
        page = items[start : start + limit]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page}

    def _delete(self, pod: dict[str, Any], options: dict[str, Any]) -> tuple[int, Any]:
        meta = pod["metadata"]
        uid = (options.get("preconditions") or {}).get("uid")
        if uid is not None and uid != meta["uid"]:
            message = f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
            return 409, _status(409, "Conflict", message + meta["uid"])
        grace = options.get("gracePeriodSeconds", 30)
        if grace == 0:
            self._record("DELETED", self.pods.pop((meta["namespace"], meta["name"])))
        else:
            # The kubelet now signals the container and waits up to `grace` seconds.
            meta["deletionTimestamp"] = "2026-12-01T06:10:00Z"
            meta["deletionGracePeriodSeconds"] = grace
            self._record("MODIFIED", pod)
        return 200, pod


def _handler(cluster: FakeCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            parsed = urlparse(self.path)
            cluster.requests.append(
                Seen(
                    self.command,
                    parsed.path,
                    {k: v[0] for k, v in parse_qs(parsed.query).items()},
                    json.loads(raw) if raw else None,  # as sent, whatever the server does next
                    self.headers.get("Authorization", ""),
                )
            )
            code, answer = cluster.handle(self.command, self.path, body)
            self.send_response(code)
            if isinstance(answer, PlainText):  # a pod's log
                data = answer.encode()
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_header("Content-Type", "application/json")
            if isinstance(answer, list):  # a watch: one JSON event per line, chunk by chunk
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in answer:
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                return
            data = json.dumps(answer).encode()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve

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
