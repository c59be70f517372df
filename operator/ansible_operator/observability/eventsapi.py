"""The two core/v1 Event calls the Event recorder makes, without `CoreV1Api`.

Where this sits: events.EventRecorder creates one `EventsApi` on the operator's API
client and calls it from its posting thread. Importing the generated `CoreV1Api` loads
some 250 model modules of the kubernetes client, about 21 MiB of private memory in the
operator process (measured for issue 11, docs/runner.md), for two calls whose bodies
are plain dicts; the API client's generic request does the same with the same
authentication, TLS settings and errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

__all__ = ["EventsApi"]


class EventsApi:
    """POST and PATCH of core/v1 Events: the two calls of `CoreV1Api` the recorder
    makes, with the same signatures and errors (ApiException on a non-2xx answer)."""

    def __init__(self, api_client: ApiClient) -> None:
        self._client = api_client

    def create_namespaced_event(
        self, namespace: str, body: Mapping[str, Any], *, _request_timeout: float
    ) -> None:
        self._call(
            "POST", namespace, "", body, content_type="application/json", timeout=_request_timeout
        )

    def patch_namespaced_event(
        self,
        name: str,
        namespace: str,
        body: Mapping[str, Any],
        *,
        _content_type: str,
        _request_timeout: float,
    ) -> None:
        self._call(
            "PATCH", namespace, name, body, content_type=_content_type, timeout=_request_timeout
        )

    def _call(
        self,
        method: str,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        content_type: str,
        timeout: float,
    ) -> None:
        path = "/api/v1/namespaces/{namespace}/events" + ("/{name}" if name else "")
        params = {"namespace": namespace, **({"name": name} if name else {})}
        serialized = self._client.param_serialize(
            method,
            path,
            path_params=params,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=dict(body),
            auth_settings=["BearerToken"],
        )
        response = self._client.call_api(*serialized, _request_timeout=timeout)
        response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
