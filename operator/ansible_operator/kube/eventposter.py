"""The Event recorder's two API calls, made by the operator's `Kube`.

Where this sits: observability.eventrecorder.EventRecorder sits below kube
in the layers, so it defines the `EventPoster` Protocol of the calls it makes
and the `run` command (controller.manager) hands it a `KubeEventPoster` on
its `Kube`. The recorder calls it from its posting thread.

Plain requests through `Kube.request`, not the generated `CoreV1Api`:
importing that loads some 250 model modules of the kubernetes client, about
21 MiB of private memory in the operator process (measured for issue 11,
docs/runner.md), for two calls whose bodies are plain dicts. Errors are the
client's (kube.kubeapi): the recorder retries KubeUnavailable and takes
NotFound on a patch for an Event that expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_operator.kube.client import MERGE_PATCH, Kube
from ansible_operator.kube.kubeapi import ResourceInfo

__all__ = ["EVENTS", "KubeEventPoster"]

EVENTS = ResourceInfo(
    group="", version="v1", kind="Event", plural="events", namespaced=True, has_status=False
)


class KubeEventPoster:
    """observability.eventrecorder.EventPoster on a `Kube`."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    def create(self, namespace: str, body: Mapping[str, Any], *, timeout: float) -> None:
        path = EVENTS.path(namespace=namespace)
        self._kube.request("POST", path, body=dict(body), timeout=timeout)

    def patch(self, namespace: str, name: str, body: Mapping[str, Any], *, timeout: float) -> None:
        path = EVENTS.path(namespace=namespace, name=name)
        self._kube.request(
            "PATCH", path, body=dict(body), content_type=MERGE_PATCH, timeout=timeout
        )
