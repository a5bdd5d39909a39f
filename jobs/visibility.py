"""Which node a pod runs on is for team members only while the pod runs on its own quota.

PAI's idle resources: "when a job runs on shared idle resources, the node name is not shown".
A team that borrows idle capacity must not learn which of another team's nodes it got; only
platform admins see a borrowed pod's node, everywhere (pages, API, websocket, CLI).

The rules, in one place:

- **Per pod.** ``Pod.borrowed`` is set when the pod is placed Not in Quota and follows its
  workload's label while it runs (``_relabels`` in ``jobs.bridge.plan``). A borrowed pod
  shows members no node; a pod that turns In Quota shows its node again.
- **Stored timeline text never names a borrowed pod's node.** Members read event messages, so
  an entry about a borrowed placement (the PLACED entry of a Not-in-Quota admission, the
  fault of a borrowed replica) is written without it, and keeps the names in its data (the
  ``NODE_KEYS``) with ``data["borrowed"] = True``: those keys are for platform admins only.
- **Every text a member reads about a workload is scrubbed** of the nodes its borrowed pods
  are or were on (``scrub``): event messages, pod reasons (the backend's words, which may
  name the node), the status reason. That covers a pod placed In Quota and relabelled Not in
  Quota later, whose PLACED entry named its node when it was the team's own.
- **Websocket.** The workspace group (members, and admins on a workspace page) is sent an
  entry without its ``NODE_KEYS`` when it is about a borrowed placement; the cluster and quota
  groups (platform admins only) get it whole. Replayed entries of a workspace are shown as
  the API shows them.

Nothing here reads the database: callers hand in what they loaded.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import Any

from console.permissions import is_platform_admin

# The keys of an entry's data that name nodes; withheld from members on borrowed placements.
NODE_KEYS = frozenset({"nodes", "node"})
# An entry's data flag: it is about a borrowed placement.
BORROWED = "borrowed"
# What a member reads where a borrowed pod's node name was.
HIDDEN = "a borrowed node"
_HIDDEN_LIST = re.compile(rf"{HIDDEN}(?:(?:, | and ){HIDDEN})+")


def sees_borrowed_nodes(user: Any) -> bool:
    """Whether the user may see which node a borrowed pod runs on: platform admins only."""
    return is_platform_admin(user)


@lru_cache(maxsize=256)
def _pattern(names: frozenset[str]) -> re.Pattern[str]:
    """A whole node name among `names`: not inside a longer name (a100-01 in a100-010)."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    # Node names are DNS labels and subdomains: letters, digits, "-" and ".". A name ends
    # where none of those follows (a sentence's final "." still ends it).
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-]|\.\w)")


def scrub(text: str, names: Collection[str]) -> str:
    """`text` with every node of `names` named as "a borrowed node" (a list of them, once)."""
    if not text or not names:
        return text
    hidden = _pattern(frozenset(names)).sub(HIDDEN, text)
    return _HIDDEN_LIST.sub("borrowed nodes", hidden)


def entry_nodes(data: Mapping[str, Any]) -> list[str]:
    """The node names an entry's data holds."""
    nodes = data.get("nodes")
    named = [str(n) for n in nodes] if isinstance(nodes, list) else []
    node = data.get("node")
    return [*named, str(node)] if isinstance(node, str) and node else named


def placement_data(nodes: list[str], *, borrowed: bool) -> dict[str, Any]:
    """The data of an entry about pods on `nodes`: with the borrowed flag when they are."""
    return {"nodes": nodes, BORROWED: borrowed}


def withheld(data: Mapping[str, Any], hidden: Collection[str] = ()) -> bool:
    """Whether members are not shown an entry's node keys.

    It is about a borrowed placement, or it names a node a borrowed pod of its workload is on
    (`hidden`).
    """
    if data.get(BORROWED):
        return True
    return bool(hidden) and any(name in hidden for name in entry_nodes(data))


def data_for_members(data: Mapping[str, Any], hidden: Collection[str] = ()) -> dict[str, Any]:
    """An entry's data (or websocket payload) as members read it."""
    shown = (
        {k: v for k, v in data.items() if k not in NODE_KEYS}
        if withheld(data, hidden)
        else dict(data)
    )
    if hidden and isinstance(shown.get("message"), str):
        shown["message"] = scrub(shown["message"], hidden)
    return shown


def hidden_nodes(pods: Iterable[tuple[bool, str | None]]) -> set[str]:
    """The nodes of a workload's borrowed pods, from (borrowed, node name) pairs."""
    return {node for borrowed, node in pods if borrowed and node}


def workload_for_members(workload: Mapping[str, Any]) -> dict[str, Any]:
    """A workload's API form (list or detail) as members read it.

    A borrowed pod's ``node`` is null (its ``borrowed`` says why); texts are scrubbed of the
    borrowed pods' nodes; entries about borrowed placements lose their node keys.
    """
    pods = workload.get("pods") or []
    hidden = hidden_nodes((bool(p.get("borrowed")), p.get("node")) for p in pods)
    events = workload.get("events") or []
    if not hidden and not any((e.get("data") or {}).get(BORROWED) for e in events):
        return dict(workload)  # nothing to withhold: most workloads of a list
    shown = dict(workload)
    shown["pods"] = [_pod_for_members(p, hidden) for p in pods]
    if "events" in shown:
        shown["events"] = [_event_for_members(e, hidden) for e in shown["events"]]
    if hidden and shown.get("status_reason"):
        shown["status_reason"] = scrub(shown["status_reason"], hidden)
    return shown


def _pod_for_members(pod: Mapping[str, Any], hidden: Collection[str]) -> dict[str, Any]:
    shown = dict(pod)
    if shown.get("borrowed"):
        shown["node"] = None
    if hidden and shown.get("reason"):
        shown["reason"] = scrub(shown["reason"], hidden)
    return shown


def _event_for_members(event: Mapping[str, Any], hidden: Collection[str]) -> dict[str, Any]:
    shown = dict(event)
    shown["message"] = scrub(shown.get("message") or "", hidden)
    shown["data"] = data_for_members(shown.get("data") or {}, hidden)
    return shown
