"""The owned pods, kept current by one long-lived watch in a background thread.

Why a thread: a watch of 60–300 s (TIDEPOOL_K8S_WATCH_SECONDS) with bookmarks keeps each process
inside the API server's watch window, so it re-lists only after `410 Gone`. The control loop
cannot wait that long in its sync, so the watch runs in a daemon thread per process (one
backend per process) and feeds this cache; `refresh()` takes what has arrived, without a round
trip. Only the first sync waits, for the first list.

The thread, forever:
- lists the owned pods page by page (`limit`/`continue`); a 410 on a continue page (the token
  expired) or on a stale resourceVersion starts the list again from scratch;
- watches from the list's resourceVersion with `allowWatchBookmarks`, and after each watch
  ends (its timeout, a reset, a chunk cut short) watches again from the last resourceVersion
  it saw, bookmarks included, backing off while the server does not answer;
- lists again only when the watch answers 410 (an ERROR event, or the HTTP status).

Memory: a pod is kept as a `PodState` of the dozen fields the backend reads, not its JSON:
100,000 pods keep 83 MB (867 bytes a pod, against 2.2 KB of JSON; bench/k8s_relist.py).
A pod deleted after it ended stays as a tombstone until the backend has recorded its outcome
(the tracking finalizer normally keeps the object itself).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any

from kubernetes import watch

from jobs.backends.kubernetes.api import NETWORK_ERRORS, Api
from jobs.backends.kubernetes.errors import ApiError, Meaning
from jobs.backends.kubernetes.manifest import Key, key_of
from jobs.backends.kubernetes.status import Observed, disruption, observe_pod, stuck

log = logging.getLogger(__name__)

FINALIZER = "tidepool.io/track"
POD_ID = "tidepool.io/pod-id"
# Backoff of the watch thread while the API server does not answer.
RETRY_SECONDS = (0.5, 1, 2, 5, 10)


@dataclass(frozen=True, slots=True)
class PodState:
    """What the backend needs of one owned pod."""

    name: str
    namespace: str
    uid: str
    key: Key | None
    pod_id: str
    node: str
    phase: str  # the API's own phase
    seen: Observed  # the phase, exit code and reason as Tidepool names them
    deleting: bool  # deletionTimestamp is set
    finalizers: tuple[str, ...]
    disrupted: str  # the DisruptionTarget reason, "" if none
    stuck: str  # a waiting reason the kubelet never leaves by itself, "" if none
    gone: bool = False  # deleted after it ended: a tombstone kept until recorded

    @property
    def finished(self) -> bool:
        """Its containers have ended: it holds nothing on its node."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def tracked(self) -> bool:
        """It still carries the tracking finalizer."""
        return FINALIZER in self.finalizers


def pod_state(obj: dict[str, Any]) -> PodState:
    """The slim state of one API pod."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    return PodState(
        name=meta["name"],
        namespace=meta.get("namespace", ""),
        uid=meta.get("uid", ""),
        key=key_of(obj),
        pod_id=(meta.get("labels") or {}).get(POD_ID, ""),
        node=spec.get("nodeName") or "",
        phase=(obj.get("status") or {}).get("phase") or "Pending",
        seen=observe_pod(obj),
        deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(meta.get("finalizers") or ()),
        disrupted=disruption(obj),
        stuck=stuck(obj),
    )


class PodCache:
    """The owned pods by name, as the watch thread last saw them."""

    def __init__(self, api: Api, selector: str, *, watch_seconds: int, page_size: int) -> None:
        self.api, self.selector = api, selector
        self.watch_seconds, self.page_size = watch_seconds, page_size
        self.pods: dict[str, PodState] = {}
        self.version: str | None = None
        self.lists = 0  # full lists done (the first, and one per 410)
        self.error: ApiError | None = None  # why the last list failed, if it did
        self.lock = threading.Lock()
        self.listed = threading.Event()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None

    def start(self) -> None:
        """Start the watch thread (once)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="k8s-pod-watch", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        """End the watch thread."""
        self.stopping.set()
        if self._watch is not None:
            self._watch.stop()  # type: ignore[no-untyped-call]
            response = getattr(self._watch, "_resp", None)
            if response is not None:
                response.close()  # wake the thread blocked reading the stream
        if self.thread is not None:
            self.thread.join(timeout=5)

    def snapshot(self) -> dict[str, PodState]:
        """The pods as they are now (a copy: the thread goes on)."""
        with self.lock:
            return dict(self.pods)

    def put(self, obj: dict[str, Any]) -> PodState:
        """A pod this process created or read itself, ahead of its watch event."""
        state = pod_state(obj)
        with self.lock:
            self.pods[state.name] = state
        return state

    def forget(self, name: str) -> None:
        """Drop a tombstone whose outcome is recorded."""
        with self.lock:
            if name in self.pods and self.pods[name].gone:
                del self.pods[name]

    def _run(self) -> None:
        """List, then watch and watch again; list again only after 410 Gone."""
        failures = 0
        while not self.stopping.is_set():
            try:
                if self.version is None:
                    self._list()
                else:
                    self._watch_once()
                failures = 0
            except ApiError as e:
                if e.meaning() == Meaning.GONE:
                    log.info("Pod watch at version %s expired; listing again.", self.version)
                    self.version = None
                    continue
                if self.version is None:
                    self.error = e  # e.g. a token without cluster-wide list permission
                    self.listed.set()
                failures = self._backoff(failures, e)
            except (*NETWORK_ERRORS, ValueError) as e:
                # A reset or truncated stream (a cut chunk, half a line of JSON): watch again
                # from the last resourceVersion.
                failures = self._backoff(failures, e)

    def _backoff(self, failures: int, e: Exception) -> int:
        wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
        log.warning("Pod watch interrupted (%s); again in %s s.", e, wait)
        self.stopping.wait(wait)
        return failures + 1

    def _list(self) -> None:
        """A full list, page by page; a page answering 410 starts it again from scratch."""
        pods: dict[str, PodState] = {}
        token: str | None = None
        while True:
            page = self.api.json(
                "list_pod_for_all_namespaces",
                label_selector=self.selector,
                limit=self.page_size,
                **({"_continue": token} if token else {}),
            )
            for obj in page.get("items") or []:
                state = pod_state(obj)
                pods[state.name] = state
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        with self.lock:
            # A pod that ended and went away between two watches is still reported once.
            for name, old in self.pods.items():
                if name not in pods and (old.finished or old.gone):
                    pods[name] = replace(old, gone=True)
            self.pods = pods
            self.version = page["metadata"]["resourceVersion"]
            self.lists += 1
            self.error = None
        self.listed.set()

    def _watch_once(self) -> None:
        """One watch from the last resourceVersion, until the server ends it."""
        self._watch = watch.Watch(return_type=object)  # type: ignore[no-untyped-call]
        self.api.limiter.take()
        self.api.calls += 1
        try:
            # Events stay raw JSON: a field this client version cannot validate must not stop
            # the watch.
            for event in self._watch.stream(  # type: ignore[no-untyped-call]
                self.api.core.list_pod_for_all_namespaces,
                label_selector=self.selector,
                resource_version=self.version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_seconds,
                _request_timeout=self.watch_seconds + self.api.request_seconds,
            ):
                self._apply(event["type"], event["raw_object"])
                if self.stopping.is_set():
                    return
        except Exception as e:
            from kubernetes.client.exceptions import ApiException

            if self.stopping.is_set():
                return  # stop() closed the stream under the read: whatever it raised, we end
            if isinstance(e, ApiException):
                status = int(e.status or 0)
                raise ApiError(status, str(e.reason or "")) from e
            raise

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        """Apply one watch event."""
        with self.lock:
            self.version = obj["metadata"].get("resourceVersion") or self.version
            if kind == "BOOKMARK":
                return
            state = pod_state(obj)
            if kind != "DELETED":
                self.pods[state.name] = state
            elif state.finished:
                self.pods[state.name] = replace(state, gone=True)
            else:
                self.pods.pop(state.name, None)
