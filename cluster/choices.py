"""Choices for the cluster app."""

from __future__ import annotations

from django.db import models


class IdleScope(models.TextChoices):
    """Where idle capacity may be borrowed from."""

    TREE = "tree", "Same quota tree"
    POOL = "pool", "Whole resource pool"


class GpuSharing(models.TextChoices):
    """How a node's GPUs are handed out, which decides the requests it takes.

    `any` (nodes imported or created by hand, simulated clusters): whole GPUs and fractions.
    `none`: whole GPUs only (a plain device plugin, or MIG slices as whole devices).
    `time-slicing` and `mps`: fractions only; each is one replica of a shared GPU, a share of
    its time (MPS also caps its compute), not isolated memory.
    """

    ANY = "any", "Whole GPUs and fractions"
    NONE = "none", "Whole GPUs only"
    TIME_SLICING = "time-slicing", "Time-slicing (fractions only)"
    MPS = "mps", "MPS (fractions only)"

    @staticmethod
    def shares(value: str) -> bool:
        """Fractions of a GPU may run here."""
        return value != GpuSharing.NONE

    @staticmethod
    def whole(value: str) -> bool:
        """Whole GPUs may run here."""
        return value in (GpuSharing.ANY, GpuSharing.NONE)
