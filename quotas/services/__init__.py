"""Every write to pools, nodes and quotas goes through these services."""
