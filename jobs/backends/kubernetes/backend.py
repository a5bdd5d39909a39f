"""The Kubernetes backend: one labelled pod per replica, a list+watch cache, reconciliation.

The pod rows are the desired state. Every process keeps its own cache of the pods it owns and
compares it with the rows at each `observe`, so several Celery workers can take turns without
sharing memory: pods are created there, and a report is made only where the cluster and the
database disagree.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

import urllib3
from django.conf import settings
from django.db import transaction
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from jobs.backends.base import NODE_REFUSAL, PodReport
from jobs.backends.kubernetes.binding import Binder
from jobs.backends.kubernetes.config import KubeConfig, api_client
from jobs.backends.kubernetes.events import Recorder
from jobs.backends.kubernetes.foreign import foreign_held
from jobs.backends.kubernetes.manifest import (
    Key,
    Refused,
    instance_url,
    key,
    key_of,
    namespace_for,
    owned,
    pod_body,
    selector,
)
from jobs.backends.kubernetes.nodes import ClusterNode, NodeSyncResult, cluster_node, nodes_sync
from jobs.backends.kubernetes.status import clip, observe_pod
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES, PodStatus

if TYPE_CHECKING:
    from jobs.models import Pod

log = logging.getLogger(__name__)

# Pods the database no longer wants get the grace the control loop gives its own stops.
ORPHAN_GRACE_SECONDS = 30
# No API call may hang the control loop for longer than this.
REQUEST_SECONDS = 30
# Client-side refusals the cluster will repeat for this pod: report the replica Failed.
REFUSING = frozenset({400, 403, 404, 422})
NETWORK_ERRORS = (urllib3.exceptions.HTTPError, OSError)


def _json(response: Any) -> dict[str, Any]:
    """The body of a raw (not preloaded) API response."""
    data: dict[str, Any] = json.loads(response.data)
    return data


def _api_message(e: ApiException) -> str:
    """The API server's own words for a refusal."""
    try:
        return str(json.loads(e.body or "")["message"])
    except (TypeError, ValueError, KeyError):
        return f"{e.status} {e.reason}"


def _finished(obj: dict[str, Any]) -> bool:
    """The pod's containers have ended: it holds nothing on its node."""
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class KubernetesBackend:
    """A cluster behind an API server; it touches only pods carrying its own labels."""

    def __init__(self, api: client.CoreV1Api, kube: KubeConfig) -> None:
        self.api = api
        self.kube = kube
        self._pods: dict[str, dict[str, Any]] = {}  # owned pods by name, as last seen
        self._version: str | None = None  # the resourceVersion the cache is at
        # replicas the cluster will not run, why, and whether a new attempt cannot help either
        self._refused: dict[Key, tuple[str, bool]] = {}
        self._nodes: dict[str, ClusterNode] | None = None  # listed during this sync
        self._listed: list[ClusterNode] | None = None  # listed by refresh, for observe's rows
        self._nodes_at: datetime | None = None  # when the node rows were last synced
        self._fresh = False  # refresh ran since the last observe
        self.binder = Binder(api, REQUEST_SECONDS)
        self.events = Recorder(api, REQUEST_SECONDS)

    @classmethod
    def from_settings(cls) -> KubernetesBackend:
        """The backend the K8S_* settings describe."""
        kube = KubeConfig.from_settings()
        return cls(client.CoreV1Api(api_client(kube)), kube)

    def create_pod(self, pod: Pod, *, now: datetime) -> None:
        """Nothing yet: the next observe creates the pod of every pending row that has none.

        By then the row is committed (a rolled-back cycle starts nothing) and the cache is fresh
        enough to see whether the node still holds pods that are stopping.
        """

    def delete_pod(self, pod: Pod, *, grace_seconds: int) -> None:
        """Stop the replica once the change commits, giving it `grace_seconds` to checkpoint."""
        name, workspace = pod.name, pod.workload.workspace.name
        preempted = pod.reason if pod.status == PodStatus.PREEMPTED else ""
        transaction.on_commit(lambda: self._delete(name, workspace, grace_seconds, preempted))

    def instance_url(self, pod: Pod) -> str | None:
        """TIDEPOOL_INSTANCE_URL_TEMPLATE filled in for the pod (manifest.instance_url)."""
        return instance_url(pod, self.kube, settings.TIDEPOOL_INSTANCE_URL_TEMPLATE)

    def logs(self, pod: Pod, *, tail: int, since: datetime | None, now: datetime) -> list[str]:
        """The pod's log from the API server (kubernetes.logs)."""
        from jobs.backends.kubernetes.logs import pod_log

        return pod_log(self.api, self.kube, pod, tail=tail, since=since)

    def refresh(self, *, now: datetime) -> None:
        """Read the cluster: its nodes when a node sync is due, and the pods since last time.

        Called before the write lock, so the watch's round trips hold up no other writer.
        """
        self._nodes = None
        due = self._nodes_at is None or (now - self._nodes_at).total_seconds() >= (
            self.kube.node_sync_seconds
        )
        self._listed = list(self._list_nodes().values()) if due else None
        self._refresh()
        self._fresh = True

    def observe(self, *, now: datetime) -> list[PodReport]:
        """Reports where the cluster and the pod rows disagree; reconciles what it can itself.

        Runs under the write lock (after `refresh`, which it calls itself if the caller did
        not), so the rows it reads stay as read until it returns. Pending rows of active
        workloads without a pod get one, once their node holds no pod that is stopping;
        running rows whose pod is gone are reported Failed (node lost if its node went away);
        owned pods that no live row of an active workload wants are deleted, Pending ones
        included. Finished pods stay for `kubectl logs`.
        """
        from jobs.models import Pod

        if not self._fresh:
            self.refresh(now=now)
        self._fresh = False
        self.binder.forget()
        if self._listed is not None:
            self._sync_node_rows(self._listed, now=now)
            self._listed = None
        # Rows are read after the cluster: a pod seen there was committed before it was created.
        live = [
            pod
            for pod in Pod.objects.filter(status__in=LIVE_POD_STATUSES).select_related(
                "workload__workspace", "node"
            )
            if pod.workload.status in ACTIVE_STATUSES
        ]
        wanted = {key(pod) for pod in live}
        cached = list(self._pods.values())
        actual = {key_of(obj): obj for obj in cached}
        # The kubelet admits a pod bound by nodeName against what still runs there, so a new
        # pod waits while a pod on its node stops (a preemption victim checkpointing).
        busy = {
            obj["spec"].get("nodeName")
            for obj in cached
            if not _finished(obj)
            and (obj["metadata"].get("deletionTimestamp") or key_of(obj) not in wanted)
        }
        reports = []
        for pod in live:
            report = self._compare(pod, actual.get(key(pod)), busy)
            if report is not None:
                reports.append(report)
        self._collect(cached, wanted)
        return reports

    def sync_nodes(self, *, now: datetime) -> NodeSyncResult:
        """List the cluster's nodes and bring the node rows in line with them."""
        return self._sync_node_rows(list(self._list_nodes().values()), now=now)

    def _sync_node_rows(self, nodes: list[ClusterNode], *, now: datetime) -> NodeSyncResult:
        """Bring the node rows in line with listed nodes, and log what needs a person."""
        result = nodes_sync(nodes=nodes, kube=self.kube)
        self._nodes_at = now
        for message in result.messages:
            log.warning(message)
        return result

    def _compare(
        self, pod: Pod, actual: dict[str, Any] | None, busy: set[str | None]
    ) -> PodReport | None:
        """What to report for one live row, given its pod in the cluster (None: no pod)."""
        k = key(pod)
        if actual is None and k not in self._refused:
            if pod.status != PodStatus.PENDING:
                return self._vanished(pod)
            if (pod.node.name if pod.node else None) not in busy:
                refusal = self.binder.refusal(pod.node.name) if pod.node else ""
                if refusal:
                    return PodReport(pod.pk, PodStatus.FAILED, reason=refusal, rejected=True)
                self._create(pod)
        if k in self._refused:
            why, final = self._refused[k]
            return PodReport(pod.pk, PodStatus.FAILED, reason=why, refused=final)
        if actual is None:
            return None
        unbound = not actual["spec"].get("nodeName") and not _finished(actual)
        if unbound and pod.node and not actual["metadata"].get("deletionTimestamp"):
            self._bind(actual, pod.node.name)  # created, but its binding failed last time
        seen = observe_pod(actual)
        if seen.phase in (pod.status, PodStatus.PENDING):
            return None
        if seen.rejected:
            return self._node_refused(pod, actual, seen.reason)
        return PodReport(
            pod.pk, seen.phase, seen.exit_code, seen.reason, seen.node_lost, message=seen.message
        )

    def _node_refused(self, pod: Pod, obj: dict[str, Any], said: str) -> PodReport:
        """The kubelet refused the pod at admission: a placement failure, not the replica's."""
        node = obj["spec"].get("nodeName") or (pod.node.name if pod.node else "its node")
        why = clip(f"{NODE_REFUSAL} {node}: {said}")
        self.events.emit(obj, "NodeRefused", f"{why}; placed again on another node.", warning=True)
        return PodReport(pod.pk, PodStatus.FAILED, reason=why, rejected=True)

    def _bind(self, obj: dict[str, Any], node: str) -> None:
        """Bind a created pod to its node and say so in an event."""
        if self.binder.bind(obj, node):
            meta = obj["metadata"]
            message = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"
            self.events.emit(obj, "Scheduled", message)

    def _vanished(self, pod: Pod) -> PodReport:
        """A running replica's pod is gone: with its node, by a drain, or deleted by hand."""
        node = pod.node.name if pod.node else ""
        nodes = self._list_nodes() if self._nodes is None else self._nodes
        state = nodes.get(node)
        if state is None:
            why = f"Node lost: {node or 'its node'} is gone"
        elif not state.ready:
            why = f"Node lost: {node} is not ready"
        elif not state.schedulable:
            why = f"Node drained: {node} {state.ineligible}"
        else:
            return PodReport(pod.pk, PodStatus.FAILED, reason="Pod deleted outside Tidepool")
        # The node takes no new work: the replica restarts elsewhere, as after a node loss.
        return PodReport(pod.pk, PodStatus.FAILED, reason=why, node_lost=True)

    def _collect(self, cached: list[dict[str, Any]], wanted: set[Key]) -> None:
        """Delete owned pods that still run but that no live row wants."""
        for obj in cached:
            if key_of(obj) in wanted or _finished(obj):
                continue
            if not obj["metadata"].get("deletionTimestamp"):
                self._delete_obj(obj, ORPHAN_GRACE_SECONDS)
        self._refused = {k: why for k, why in self._refused.items() if k in wanted}

    def _create(self, pod: Pod) -> None:
        """POST the replica's pod; a refusal is kept and reported as the replica's failure."""
        k = key(pod)
        try:
            namespace, body = pod_body(pod, self.kube)
        except Refused as e:
            self._refused[k] = (clip(str(e)), True)
            return
        try:
            created = _json(
                self.api.create_namespaced_pod(
                    namespace, body, _preload_content=False, _request_timeout=REQUEST_SECONDS
                )
            )
        except ApiException as e:
            if e.status == 409:
                self._adopt(namespace, pod.name, k)
            elif e.status in REFUSING:
                self._refused[k] = (clip(f"Kubernetes refused the pod: {_api_message(e)}"), True)
            else:
                log.warning(
                    "Creating pod %s/%s failed (%s); retrying later.", namespace, pod.name, e
                )
            return
        except NETWORK_ERRORS as e:
            log.warning("Creating pod %s/%s failed (%s); retrying later.", namespace, pod.name, e)
            return
        self._pods[pod.name] = created
        self._bind(created, pod.node.name if pod.node else "")

    def _adopt(self, namespace: str, name: str, k: Key) -> None:
        """A pod of that name exists: ours from an earlier try, or someone else's (refused)."""
        try:
            existing = self._read(namespace, name)
        except (ApiException, *NETWORK_ERRORS) as e:
            log.warning("Reading pod %s/%s failed (%s); retrying later.", namespace, name, e)
            return
        if existing is not None and owned(existing, self.kube) and key_of(existing) == k:
            self._pods[name] = existing
        elif existing is not None:
            # the next attempt has another name, so a restart can succeed
            why = f"A pod named {name} already exists in {namespace} and is not ours."
            self._refused[k] = (why, False)

    def _read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """One pod as the API has it, None if there is none."""
        try:
            return _json(
                self.api.read_namespaced_pod(
                    name, namespace, _preload_content=False, _request_timeout=REQUEST_SECONDS
                )
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _delete(self, name: str, workspace: str, grace_seconds: int, preempted: str = "") -> None:
        """Delete the replica's pod if it exists and is ours (`preempted`: why, if it was)."""
        obj = self._pods.get(name)
        if obj is None:
            try:
                obj = self._read(namespace_for(workspace, self.kube), name)
            except Refused:
                return  # no valid namespace: the pod was never created
            except (ApiException, *NETWORK_ERRORS) as e:
                log.warning("Reading pod %s failed (%s); the next observe deletes it.", name, e)
                return
            if obj is None:
                return
        if not owned(obj, self.kube):
            log.warning("Not deleting pod %s: it is not this Tidepool's.", name)
            return
        self._delete_obj(obj, grace_seconds)
        if preempted:
            self.events.emit(obj, "Preempted", preempted, warning=True)

    def _delete_obj(self, obj: dict[str, Any], grace_seconds: int) -> None:
        """DELETE exactly this pod (its uid), with a grace period to checkpoint."""
        meta = obj["metadata"]
        options = client.V1DeleteOptions(
            grace_period_seconds=grace_seconds,
            # If the name now belongs to another pod, the API refuses instead of deleting it.
            preconditions=client.V1Preconditions(uid=meta["uid"]),
        )
        try:
            self.api.delete_namespaced_pod(
                meta["name"],
                meta["namespace"],
                body=options,
                _preload_content=False,
                _request_timeout=REQUEST_SECONDS,
            )
        except ApiException as e:
            if e.status not in (404, 409):  # gone already, or no longer the pod we meant
                log.warning("Deleting pod %s failed (%s); retrying later.", meta["name"], e)
        except NETWORK_ERRORS as e:
            log.warning("Deleting pod %s failed (%s); retrying later.", meta["name"], e)

    def _refresh(self) -> None:
        """Bring the cache up to date: watch from its resourceVersion, list again after 410 Gone."""
        if self._version is None:
            self._list()
            return
        # Events stay raw JSON like the listed pods: a field this client version cannot
        # validate must not stop the watch.
        events = watch.Watch(return_type=object).stream(  # type: ignore[no-untyped-call]
            self.api.list_pod_for_all_namespaces,
            label_selector=selector(self.kube),
            resource_version=self._version,
            allow_watch_bookmarks=True,
            # The server ends the watch after this long; the control loop runs again soon.
            timeout_seconds=self.kube.watch_seconds,
            _request_timeout=self.kube.watch_seconds + REQUEST_SECONDS,
        )
        try:
            for event in events:
                self._apply(event["type"], event["raw_object"])
        except ApiException as e:
            if e.status != 410:
                raise
            log.info("Watch from resourceVersion %s expired; listing again.", self._version)
            self._list()

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        """Apply one watch event to the cache."""
        self._version = obj["metadata"].get("resourceVersion") or self._version
        if kind == "BOOKMARK":
            return
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self._pods.pop(name, None)
        else:
            self._pods[name] = obj

    def _list(self) -> None:
        """Replace the cache with a fresh list of the pods this instance owns."""
        data = _json(
            self.api.list_pod_for_all_namespaces(
                label_selector=selector(self.kube),
                _preload_content=False,
                _request_timeout=REQUEST_SECONDS,
            )
        )
        self._pods = {p["metadata"]["name"]: p for p in data.get("items") or []}
        self._version = data["metadata"]["resourceVersion"]

    def _list_nodes(self) -> dict[str, ClusterNode]:
        """The cluster's nodes by name, listed now (and kept for the rest of this observe)."""
        data = _json(self.api.list_node(_preload_content=False, _request_timeout=REQUEST_SECONDS))
        held = foreign_held(self.api, self.kube, REQUEST_SECONDS)
        nodes = (cluster_node(o, self.kube, held.get(o["metadata"]["name"])) for o in data["items"])
        self._nodes = {n.name: n for n in nodes}
        return self._nodes
