"""The Kubernetes backend: one labelled pod per replica, a watched cache, reconciliation.

The pod rows are the desired state. Each process keeps its own cache of the pods it owns,
fed by a long-lived watch in a background thread (watch.py), and compares it with the rows at
each `observe`, under the write lock, so several Celery workers can take turns without sharing
memory: pods are created there, and a report is made only where the cluster and the database
disagree. Every call goes through one wrapper (api.py: rate limit, retries, error meanings).

A created pod carries the tracking finalizer `tidepool.io/track`: even deleted, it stays (and
its outcome with it) until a sync finds its row ended, i.e. the outcome is in the database;
then the finalizer is removed, and the finished pod is deleted after the retention period.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from kubernetes import client

from jobs.backends.base import NODE_REFUSAL, PodReport
from jobs.backends.kubernetes.api import Api, RateLimiter
from jobs.backends.kubernetes.binding import Binder
from jobs.backends.kubernetes.config import KubeConfig, api_client
from jobs.backends.kubernetes.errors import ApiError, Meaning
from jobs.backends.kubernetes.events import Recorder
from jobs.backends.kubernetes.foreign import foreign_held
from jobs.backends.kubernetes.manifest import (
    Key,
    Refused,
    instance_url,
    key,
    namespace_for,
    owned,
    pod_body,
    selector,
)
from jobs.backends.kubernetes.nodes import ClusterNode, NodeSyncResult, cluster_node, nodes_sync
from jobs.backends.kubernetes.ownership import (
    Budget,
    database_instance,
    report_unknown,
    rows_for,
)
from jobs.backends.kubernetes.status import clip
from jobs.backends.kubernetes.watch import FINALIZER, PodCache, PodState
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES, PodStatus

if TYPE_CHECKING:
    from jobs.models import Pod

log = logging.getLogger(__name__)

# Pods the database no longer wants get the grace the control loop gives its own stops.
ORPHAN_GRACE_SECONDS = 30
# A create held by a 403/404 (quota, Pod Security, namespace) is tried again after this long.
HOLD_RETRY_SECONDS = 30


class KubernetesBackend:
    """A cluster behind an API server; it touches only pods carrying its own labels."""

    def __init__(self, core: client.CoreV1Api, kube: KubeConfig) -> None:
        self.kube = kube
        self.api = Api(
            core,
            RateLimiter(kube.qps, kube.burst),
            backoff_seconds=kube.backoff_seconds,
            request_seconds=kube.request_seconds,
        )
        self.cache = PodCache(
            self.api, selector(kube), watch_seconds=kube.watch_seconds, page_size=kube.page_size
        )
        # replicas the cluster will not run, why, and whether a new attempt cannot help either
        self._refused: dict[Key, tuple[str, bool]] = {}
        # replicas whose create the cluster holds back (quota, Pod Security), and until when
        self._held: dict[Key, tuple[str, datetime]] = {}
        self._since: dict[str, datetime] = {}  # first seen stuck/terminating/not ready, by name
        self._nodes: dict[str, ClusterNode] | None = None  # listed during this sync
        self._last_nodes: dict[str, ClusterNode] = {}  # as last listed, for NotReady timeouts
        self._listed: list[ClusterNode] | None = None  # listed by refresh, for observe's rows
        self._nodes_at: datetime | None = None  # when the node rows were last synced
        self._fresh = False  # refresh ran since the last observe
        self.binder = Binder(self.api)
        self.events = Recorder(self.api)

    @classmethod
    def from_settings(cls) -> KubernetesBackend:
        """The backend the K8S_* settings describe."""
        kube = KubeConfig.from_settings()
        api = client.CoreV1Api(api_client(kube))
        return cls(api, replace(kube, instance=kube.instance or database_instance()))

    def close(self) -> None:
        """Stop the watch thread."""
        self.cache.stop()

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
        """Read the nodes when a node sync is due; the pods are what the watch brought so far.

        Called before the write lock, so round trips hold up no other writer. The first call
        starts the watch thread and waits for its first list.
        """
        self.cache.start()
        if not self.cache.listed.wait(self.kube.request_seconds * 4):
            raise ApiError(0, "the first list of pods did not finish")
        if self.cache.error is not None and self.cache.version is None:
            raise _list_refused(self.cache.error)
        self._nodes = None
        due = self._nodes_at is None or (now - self._nodes_at).total_seconds() >= (
            self.kube.node_sync_seconds
        )
        self._listed = list(self._list_nodes().values()) if due else None
        self._fresh = True

    def observe(self, *, now: datetime) -> list[PodReport]:
        """Reports where the cluster and the pod rows disagree; reconciles what it can itself.

        Runs under the write lock (after `refresh`, which it calls itself if the caller did
        not), so the rows it reads stay as read until it returns. Pending rows of active
        workloads without a pod get one, once their node holds no pod that is stopping;
        running rows whose pod is gone are reported Failed (node lost if its node went away);
        owned pods that a row of this database no longer wants are deleted, at most
        TIDEPOOL_K8S_MAX_DELETES a sync.
        """
        from jobs.models import Pod

        if not self._fresh:
            self.refresh(now=now)
        self._fresh = False
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
        cached = list(self.cache.snapshot().values())
        self.binder.forget({s.name for s in cached if not s.node})
        actual = {s.key: s for s in cached if s.key is not None}
        # The kubelet admits a pod bound by nodeName against what still runs there, so a new
        # pod waits while a pod on its node stops (a preemption victim checkpointing).
        busy = {
            s.node
            for s in cached
            if not s.finished and not s.gone and (s.deleting or s.key not in wanted)
        }
        reports = []
        for pod in live:
            report = self._compare(pod, actual.get(key(pod)), busy, now)
            if report is not None:
                reports.append(report)
        self._collect(cached, wanted, now)
        names = {s.name for s in cached}
        self._since = {
            k: at
            for k, at in self._since.items()
            if k.startswith("notready/") or k.split("/", 1)[1] in names
        }
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
        self, pod: Pod, actual: PodState | None, busy: set[str], now: datetime
    ) -> PodReport | None:
        """What to report for one live row, given its pod in the cluster (None: no pod)."""
        k = key(pod)
        if actual is None and k not in self._refused:
            if pod.status != PodStatus.PENDING:
                return self._vanished(pod)
            if (pod.node.name if pod.node else "") not in busy:
                refusal = self.binder.refusal(pod.node.name) if pod.node else ""
                if refusal:
                    return PodReport(pod.pk, PodStatus.FAILED, reason=refusal, rejected=True)
                self._create(pod, now)
        if k in self._refused:
            why, final = self._refused[k]
            return PodReport(pod.pk, PodStatus.FAILED, reason=why, refused=final)
        if actual is None:
            return None
        if not actual.node and pod.node and not actual.finished and not actual.deleting:
            self._bind(actual, pod.node.name)  # created, but its binding failed last time
        return self._judge(pod, actual, now)

    def _judge(self, pod: Pod, actual: PodState, now: datetime) -> PodReport | None:
        """The report for a row whose pod exists: its phase, a disruption, or a deadline."""
        seen = actual.seen
        if actual.disrupted and not seen.node_lost and seen.phase == PodStatus.FAILED:
            return PodReport(pod.pk, PodStatus.FAILED, reason=actual.disrupted, disrupted=True)
        if actual.stuck and not actual.finished:
            if self._overdue(f"stuck/{actual.name}", now, self.kube.image_pull_grace_seconds):
                return PodReport(pod.pk, PodStatus.FAILED, reason=seen.reason)
            return None  # within its grace: still Pending
        late = self._deadline(pod, actual, now)
        if late is not None:
            return late
        if seen.phase in (pod.status, PodStatus.PENDING):
            return None
        if seen.rejected:
            return self._node_refused(pod, actual, seen.reason)
        return PodReport(
            pod.pk, seen.phase, seen.exit_code, seen.reason, seen.node_lost, message=seen.message
        )

    def _node_refused(self, pod: Pod, actual: PodState, said: str) -> PodReport:
        """The kubelet refused the pod at admission: a placement failure, not the replica's."""
        node = actual.node or (pod.node.name if pod.node else "its node")
        why = clip(f"{NODE_REFUSAL} {node}: {said}")
        self.events.emit(
            actual, "NodeRefused", f"{why}; placed again on another node.", warning=True
        )
        return PodReport(pod.pk, PodStatus.FAILED, reason=why, rejected=True)

    def _bind(self, state: PodState, node: str) -> None:
        """Bind a created pod to its node and say so in an event."""
        if self.binder.bind(state, node):
            message = f"Successfully assigned {state.namespace}/{state.name} to {node}"
            self.events.emit(state, "Scheduled", message)

    def _deadline(self, pod: Pod, actual: PodState, now: datetime) -> PodReport | None:
        """Replace a pod stuck terminating, not pulling its image, or never starting.

        A waiting reason the kubelet never leaves (ErrImagePull) keeps the replica Pending for
        a grace period, a pod that stays Pending fails after a deadline, and one that stays
        Terminating is replaced (its node is handled as lost) and force-deleted.
        """
        if actual.finished:
            return None
        if actual.deleting:
            if self._overdue(f"terminating/{actual.name}", now, self.kube.terminating_seconds):
                self._force(actual)
                why = f"Stuck terminating for over {self.kube.terminating_seconds:.0f} s"
                return PodReport(pod.pk, PodStatus.FAILED, reason=why, disrupted=True)
            return None
        waited = now - pod.created_at >= timedelta(seconds=self.kube.pending_seconds)
        if actual.phase == "Pending" and pod.status == PodStatus.PENDING and waited:
            why = f"Not started within {self.kube.pending_seconds:.0f} s of its creation"
            return PodReport(pod.pk, PodStatus.FAILED, reason=why)
        if actual.phase == "Running" and self._not_ready(actual.node, now):
            why = f"Node lost: {actual.node} not ready for {self.kube.not_ready_seconds:.0f} s"
            return PodReport(pod.pk, PodStatus.FAILED, reason=why, node_lost=True)
        return None

    def _overdue(self, what: str, now: datetime, seconds: float) -> bool:
        """Whether `what` was first seen at least `seconds` ago (now, if never before)."""
        first = self._since.setdefault(what, now)
        return (now - first).total_seconds() >= seconds

    def _not_ready(self, node: str, now: datetime) -> bool:
        """The node has been listed NotReady for the NotReady timeout."""
        state = self._last_nodes.get(node)
        if state is None or state.ready:
            self._since.pop(f"notready/{node}", None)
            return False
        return self._overdue(f"notready/{node}", now, self.kube.not_ready_seconds)

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

    def _collect(self, cached: list[PodState], wanted: set[Key], now: datetime) -> None:
        """Release recorded pods, delete unwanted ones this database knows, leave the rest."""
        others = [s for s in cached if s.key not in wanted]
        rows = rows_for(s.key for s in others if s.key is not None)
        budget, unknown = Budget(self.kube.max_deletes), []
        for state in others:
            row = rows.get(state.key) if state.key is not None else None
            if row is None or str(row.pk) != state.pod_id:
                if not state.gone:
                    unknown.append(state.name)
                continue
            if row.live:
                continue  # its workload is ending in this very sync
            if state.gone:
                self.cache.forget(state.name)  # its outcome is recorded
            elif state.finished or state.deleting:
                self._release(state, row.ended_at, now, budget)
            elif budget.take():
                self._delete_state(state, ORPHAN_GRACE_SECONDS)
        budget.report()
        if unknown:
            from jobs.models import Pod

            report_unknown(unknown, rows_exist=Pod.objects.exists())
        else:
            report_unknown([], rows_exist=True)
        self._refused = {k: why for k, why in self._refused.items() if k in wanted}
        self._held = {k: held for k, held in self._held.items() if k in wanted}

    def _release(
        self, state: PodState, ended_at: datetime | None, now: datetime, budget: Budget
    ) -> None:
        """Its outcome is recorded: drop the finalizer; delete it after the retention period."""
        if state.tracked:
            self._unfinalize(state)
        if state.deleting:
            if not state.finished and self._overdue(
                f"terminating/{state.name}", now, self.kube.terminating_seconds
            ):
                self._force(state)
            return
        retained = ended_at is None or now - ended_at < timedelta(
            seconds=self.kube.retention_seconds
        )
        if not retained and budget.take():
            self._delete_state(state, 0)  # it has ended; its logs were kept long enough

    def _unfinalize(self, state: PodState) -> None:
        """Remove the tracking finalizer (a JSON patch that checks it is still where it was)."""
        i = state.finalizers.index(FINALIZER)
        patch = [
            {"op": "test", "path": f"/metadata/finalizers/{i}", "value": FINALIZER},
            {"op": "remove", "path": f"/metadata/finalizers/{i}"},
        ]
        try:
            patched = self.api.json("patch_namespaced_pod", state.name, state.namespace, patch)
            self.cache.put(patched)
        except ApiError as e:
            if e.meaning() != Meaning.NOT_FOUND:
                log.warning("Releasing pod %s failed (%s); retrying later.", state.name, e)

    def _force(self, state: PodState) -> None:
        """A pod stuck terminating: drop the finalizer and delete it without grace."""
        if state.tracked:
            self._unfinalize(state)
        self._delete_state(state, 0)

    def _create(self, pod: Pod, now: datetime) -> None:
        """POST the replica's pod (the hook for a node re-check and binding before it).

        422 is final (the API's words), 403/404 hold the replica Pending with the reason on
        its row, 409 adopts the pod a timed-out earlier try created, anything else waits for
        the next sync.
        """
        k = key(pod)
        held = self._held.get(k)
        if held is not None and now < held[1]:
            return
        try:
            namespace, body = pod_body(pod, self.kube)
        except Refused as e:
            self._refused[k] = (clip(str(e)), True)
            return
        assert body.metadata is not None  # pod_body always names the pod
        body.metadata.finalizers = [FINALIZER]
        try:
            created = self.api.json("create_namespaced_pod", namespace, body)
        except ApiError as e:
            self._create_refused(pod, namespace, e, now)
            return
        self._held.pop(k, None)
        self._bind(self.cache.put(created), pod.node.name if pod.node else "")

    def _create_refused(self, pod: Pod, namespace: str, e: ApiError, now: datetime) -> None:
        """Answer a refused create by what the refusal means."""
        from jobs.models import Pod as PodRow

        k = key(pod)
        meaning = e.meaning(creating=True)
        if meaning == Meaning.CONFLICT:
            self._adopt(namespace, pod.name, k)
        elif meaning == Meaning.HOLD:
            why = clip(f"Waiting: Kubernetes holds the pod back: {e.message}")
            self._held[k] = (why, now + timedelta(seconds=HOLD_RETRY_SECONDS))
            PodRow.objects.filter(pk=pod.pk, status=PodStatus.PENDING).update(reason=why)
        elif meaning == Meaning.REFUSED:
            self._refused[k] = (clip(f"Kubernetes refused the pod: {e.message}"), True)
        else:
            log.warning("Creating pod %s/%s failed (%s); retrying later.", namespace, pod.name, e)

    def _adopt(self, namespace: str, name: str, k: Key) -> None:
        """A pod of that name exists: ours from an earlier try, or someone else's (refused)."""
        try:
            existing = self.api.json("read_namespaced_pod", name, namespace)
        except ApiError as e:
            log.warning("Reading pod %s/%s failed (%s); retrying later.", namespace, name, e)
            return
        if owned(existing, self.kube) and self.cache.put(existing).key == k:
            return
        # the next attempt has another name, so a restart can succeed
        why = f"A pod named {name} already exists in {namespace} and is not ours."
        self._refused[k] = (why, False)

    def _delete(self, name: str, workspace: str, grace_seconds: int, preempted: str = "") -> None:
        """Delete the replica's pod if it exists and is ours (`preempted`: why, if it was)."""
        state = self.cache.snapshot().get(name)
        if state is None:
            try:
                namespace = namespace_for(workspace, self.kube)
                obj = self.api.json("read_namespaced_pod", name, namespace)
            except Refused:
                return  # no valid namespace: the pod was never created
            except ApiError as e:
                if e.meaning() != Meaning.NOT_FOUND:
                    log.warning("Reading pod %s failed (%s); the next sync deletes it.", name, e)
                return
            if not owned(obj, self.kube):
                log.warning("Not deleting pod %s: it is not this Tidepool's.", name)
                return
            state = self.cache.put(obj)
        if not state.gone:
            self._delete_state(state, grace_seconds)
            if preempted:
                self.events.emit(state, "Preempted", preempted, warning=True)

    def _delete_state(self, state: PodState, grace_seconds: int) -> None:
        """DELETE exactly this pod (its uid), with a grace period to checkpoint."""
        options = client.V1DeleteOptions(
            grace_period_seconds=grace_seconds,
            # If the name now belongs to another pod, the API refuses instead of deleting it.
            preconditions=client.V1Preconditions(uid=state.uid),
        )
        try:
            self.api.call("delete_namespaced_pod", state.name, state.namespace, body=options)
        except ApiError as e:
            if e.meaning() not in (Meaning.NOT_FOUND, Meaning.CONFLICT):
                log.warning("Deleting pod %s failed (%s); retrying later.", state.name, e)

    def _list_nodes(self) -> dict[str, ClusterNode]:
        """The cluster's nodes by name, listed now (and kept for the rest of this observe)."""
        try:
            data = self.api.json("list_node")
            held = foreign_held(self.api, self.kube)
        except ApiError as e:
            raise _list_refused(e) from e
        nodes = (cluster_node(o, self.kube, held.get(o["metadata"]["name"])) for o in data["items"])
        self._nodes = {n.name: n for n in nodes}
        self._last_nodes = self._nodes
        return self._nodes


def _list_refused(e: ApiError) -> Exception:
    """A list the API refuses: a token without cluster-wide permission is a configuration error."""
    if e.status == 403:
        return ImproperlyConfigured(
            "The Kubernetes backend lists pods and nodes in all namespaces, but its token may "
            f"not: {e.message}. Grant its service account list and watch on pods and list on "
            "nodes at cluster scope (a ClusterRole and ClusterRoleBinding, deploy/)."
        )
    return e
