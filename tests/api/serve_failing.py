"""The served app (console.serving.application) with one view and one consumer that raise.

test_server_errors runs uvicorn on it as production does (``uvicorn --factory``, the
production settings), so the log it writes is the one operators read.
"""

from __future__ import annotations

from typing import Any


def application() -> Any:
    """console.serving's app, once a job list and the cluster feed raise RuntimeError."""
    from console.serving import application as served

    app = served()
    from jobs.api.views import JobViewSet
    from jobs.consumers import ClusterEventsConsumer

    def fail_http(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom over http")

    async def fail_websocket(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom over websocket")

    JobViewSet.initial = fail_http  # type: ignore[method-assign]
    ClusterEventsConsumer.connect = fail_websocket  # type: ignore[method-assign]
    return app
