"""Django's SQLite backend with writers queued in the process (see base.py)."""
