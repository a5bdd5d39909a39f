"""Pages of the quota app: the quota tree (quotas.py) and node pools and nodes (nodes.py)."""
