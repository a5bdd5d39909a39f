"""Per-node-pool amounts of a quota, as the services take them and the audit log keeps them."""

from __future__ import annotations

from dataclasses import dataclass

RESOURCES = ("gpu", "cpu", "memory")


@dataclass(frozen=True)
class Amounts:
    """A quota's min and optional max on one node pool: milli-GPU, millicores, MiB."""

    min_gpu: int = 0
    min_cpu: int = 0
    min_memory: int = 0
    max_gpu: int | None = None
    max_cpu: int | None = None
    max_memory: int | None = None

    def min(self, resource: str) -> int:
        """The guaranteed amount of one resource."""
        return int(getattr(self, f"min_{resource}"))

    def max(self, resource: str) -> int | None:
        """The limit on one resource, None for no limit."""
        value = getattr(self, f"max_{resource}")
        return None if value is None else int(value)

    def with_min(self, resource: str, value: int) -> Amounts:
        """A copy with one guaranteed amount replaced."""
        fields: dict[str, int | None] = {f"min_{r}": self.min(r) for r in RESOURCES}
        fields.update({f"max_{r}": self.max(r) for r in RESOURCES})
        fields[f"min_{resource}"] = value
        return Amounts(**fields)  # type: ignore[arg-type]


UNIT = {"gpu": "GPUs", "cpu": "millicores", "memory": "MiB"}


def show(resource: str, value: int | None) -> str:
    """A human figure for one resource: milli-GPUs shown as GPUs."""
    from console.units import milli_to_gpus

    if value is None:
        return "unlimited"
    if resource == "gpu":
        return f"{milli_to_gpus(value)} GPUs"
    return f"{value} {UNIT[resource]}"
