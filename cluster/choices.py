"""Choices for the cluster app."""

from __future__ import annotations

from django.db import models


class IdleScope(models.TextChoices):
    """Where idle capacity may be borrowed from."""

    TREE = "tree", "Same quota tree"
    POOL = "pool", "Whole resource pool"
