"""A node's GPUs as NVIDIA's device plugin exposes them, read from GPU feature discovery labels.

- Time-slicing and MPS (`nvidia.com/gpu.sharing-strategy`): with `renameByDefault: false` the
  node advertises `gpu.count × gpu.replicas` of `nvidia.com/gpu`, each a replica (a share of
  one GPU's time; MPS also caps its compute; memory is not isolated). Tidepool counts the
  physical GPUs, places only fractions there, and asks for one replica per fractional replica.
  Whole GPUs never go there: a replica is not a GPU, and two replicas may share one.
- MIG with `nvidia.com/mig.strategy: single`: every `nvidia.com/gpu` is a slice of one
  profile (`gpu.product` ends in `-MIG-<profile>`). Slices are not GPUs of the node's pool:
  the node joins the pool `<pool>-MIG-<profile>` (create it to use the node), whose devices
  are slices, so a job asks for that pool and N of its slices.
- MIG `mixed` (`nvidia.com/mig-<profile>` resources) is not modelled: only the node's
  non-MIG `nvidia.com/gpu` count, and the sync says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.choices import GpuSharing

SHARING = "nvidia.com/gpu.sharing-strategy"
MIG_STRATEGY = "nvidia.com/mig.strategy"
COUNT = "nvidia.com/gpu.count"
REPLICAS = "nvidia.com/gpu.replicas"
PRODUCT = "nvidia.com/gpu.product"
SHARED_STRATEGIES = {"time-slicing": GpuSharing.TIME_SLICING, "mps": GpuSharing.MPS}


@dataclass(frozen=True)
class Gpus:
    """How many GPUs (or MIG slices) a node has for Tidepool, and how they are handed out."""

    count: int
    sharing: str  # cluster.choices.GpuSharing
    replicas: int  # device plugin replicas per GPU (1: not shared)
    mig_profile: str  # e.g. "1g.10gb" with MIG single; "" otherwise
    note: str = ""  # what a person should know (a mixed MIG node)


def _int(labels: dict[str, str], name: str, default: int) -> int:
    try:
        return max(int(labels.get(name, default)), 0)
    except ValueError:
        return default


def node_gpus(labels: dict[str, str], advertised: int) -> Gpus:
    """Read the node's GPUs from its labels and the `nvidia.com/gpu` it advertises."""
    strategy = SHARED_STRATEGIES.get(labels.get(SHARING, "none"))
    if strategy is not None:
        replicas = max(_int(labels, REPLICAS, 1), 1)
        count = _int(labels, COUNT, advertised // replicas)
        # never more than the replicas advertised allow (a GPU dropped off the bus)
        return Gpus(min(count, advertised // replicas), strategy, replicas, "")
    mig = labels.get(MIG_STRATEGY, "none")
    if mig == "single":
        _, found, profile = labels.get(PRODUCT, "").rpartition("-MIG-")
        return Gpus(advertised, GpuSharing.NONE, 1, profile if found else "unknown")
    note = ""
    if mig == "mixed":
        note = "MIG strategy mixed: its nvidia.com/mig-<profile> slices are not used by Tidepool"
    return Gpus(advertised, GpuSharing.NONE, 1, "", note)


def gpus_held(amount: int, gpus: Gpus) -> int:
    """Physical GPUs (or slices) that `amount` of `nvidia.com/gpu` held by another pod takes."""
    return -(-amount // gpus.replicas)
