"""Loaded by `bench/lock_holds.py` into the server it starts: log every hold of the writer lock.

Each hold of console.fast.sqlite's process writer lock becomes a line in $LOCKTRACE_OUT:
``monotonic-seconds label held-ms``, the label being the control-loop task (console.runner)
or the thread's name (``http-write`` for API writes). Only in `manage.py serve`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
import time
from types import ModuleType
from typing import IO, Any

OUT = os.environ.get("LOCKTRACE_OUT", "")
_task = threading.local()


class TracedLock:
    """The writer lock, writing how long each holder kept it."""

    def __init__(self, lock: Any, out: IO[str]) -> None:
        self.lock = lock
        self.out = out
        self.began = 0.0
        self.label = ""

    def acquire(self, timeout: float = -1) -> bool:
        got = bool(self.lock.acquire(timeout=timeout))
        if got:
            self.began = time.perf_counter()
            name = threading.current_thread().name.split("_")[0]
            self.label = getattr(_task, "name", None) or name
        return got

    def release(self) -> None:
        held, label = time.perf_counter() - self.began, self.label
        self.lock.release()
        self.out.write(f"{time.monotonic():.4f} {label} {held * 1000:.3f}\n")

    def locked(self) -> bool:
        return bool(self.lock.locked())


def _patch(name: str, module: ModuleType) -> None:
    """Trace the writer lock; name the runner's tasks."""
    if name == "console.fast.sqlite.base":
        module._writer = TracedLock(module._writer, open(OUT, "a", buffering=1))  # noqa: SIM115
        return
    call = module.Runner._call

    def named(self: Any, task: str, function: Any) -> None:
        _task.name = task.rsplit(".", 1)[-1]
        try:
            call(self, task, function)
        finally:
            _task.name = None

    module.Runner._call = named


class _Finder(importlib.abc.MetaPathFinder):
    """Patch the two modules right after they are first imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in ("console.fast.sqlite.base", "console.runner"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _patch(name, module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if OUT and "serve" in sys.argv:
    sys.meta_path.insert(0, _Finder())
