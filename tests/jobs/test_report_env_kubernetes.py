"""A replica's pod on Kubernetes carries where to report and its attempt's token."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from jobs.models import Workload
from jobs.reports.buffer import BUFFER
from jobs.reports.tokens import report_token
from tests.jobs.k8s_fake import FakeCluster

# The Kubernetes backend's fixtures: the real client against the stand-in API server.
from tests.jobs.test_kubernetes_backend import (  # noqa: F401
    cluster,
    k8s,
    loop,
    posted,
    server,
    train,
)


@pytest.fixture(autouse=True)
def empty_buffer() -> Iterator[None]:
    """Nothing buffered is left for other tests."""
    yield
    BUFFER.drain()


def test_each_pod_gets_the_report_url_and_its_own_token(
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    settings: Any,
    client: Client,
) -> None:
    settings.TIDEPOOL_REPORT_URL = "http://tidepool.example:8000"
    job = train(replicas=2)
    loop()
    tokens = []
    for pod in job.pods.order_by("index"):
        (body,) = posted(cluster, pod.name)
        env = {e["name"]: e["value"] for e in body["spec"]["containers"][0]["env"]}
        assert env["TIDEPOOL_REPORT_URL"] == "http://tidepool.example:8000/api/v1/report/"
        assert env["TIDEPOOL_REPORT_TOKEN"] == report_token(pod)
        assert "TIDEPOOL_RESUME_FROM" not in env  # a first attempt resumes from nothing
        tokens.append(env["TIDEPOOL_REPORT_TOKEN"])
    assert len(set(tokens)) == 2
    # What the pod was given is what the endpoint takes.
    answer = client.post(
        "/api/v1/report/",
        data=json.dumps({"heartbeat": True}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {tokens[0]}"},
    )
    assert answer.status_code == 202
