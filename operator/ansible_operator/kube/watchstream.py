"""One watch request's events, read off the HTTP stream: kube.client.Kube.watch's answer.

Where it sits: `Kube.watch` sends the request and, once the API server has
answered 200, wraps the open response in an `HttpWatchStream`; its reader
(controller.dependents, one thread per watched kind and namespace) iterates
it, and `stop()` from another thread ends a read waiting for the next event
(at shutdown).

The API server sends one JSON object per line: `{"type": ..., "object": ...}`.
An ERROR event carries a Status: code 410 (the version watched from is too
old) becomes ApiError(410), anything else KubeUnavailable, as the rest of
the client's errors (kube.kubeapi). Lines are decoded with kube.deepjson,
as every other answer of the client: objects may be nested deeper than the
json module recurses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import urllib3

from ansible_operator.errors import ApiError, KubeUnavailable
from ansible_operator.kube import deepjson
from ansible_operator.kube.kubeapi import GONE, WatchEvent

_CHUNK = 64 * 1024


def to_event(line: Mapping[str, Any], *, what: str) -> WatchEvent:
    """The WatchEvent of one decoded line; an ERROR event raises instead."""
    kind = str(line.get("type") or "")
    obj = dict(line.get("object") or {})
    if kind == "ERROR":
        if obj.get("code") == GONE:
            message = str(obj.get("message") or "too old resource version")
            raise ApiError(GONE, message, reason="Expired")
        raise KubeUnavailable(f"{what}: {obj.get('message')}")
    return WatchEvent(kind, obj)


class HttpWatchStream:
    """A WatchStream (kube.kubeapi) on an open urllib3 response."""

    def __init__(self, response: urllib3.BaseHTTPResponse, *, what: str) -> None:
        self._response = response
        self._what = what
        self._complete = False
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = b""
        try:
            for chunk in self._response.stream(_CHUNK):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield to_event(deepjson.loads(line), what=self._what)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            # A dropped connection, a read timeout, a line that is not JSON.
            raise KubeUnavailable(f"{self._what}: {err}") from err
        self._complete = True

    def stop(self) -> None:
        self._response.shutdown()  # unblocks a thread waiting in stream()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A stream left half-read must not go back into the shared pool.
        if self._complete:
            self._response.release_conn()
        else:
            self._response.close()
