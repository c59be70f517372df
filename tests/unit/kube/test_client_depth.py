"""kube.client.Kube.request: objects of any depth go out and come back, errors keep their meaning.

A local HTTP server stands in for the API server: it answers GETs with a
stored document, echoes request bodies, and answers chosen paths with an
error status, recording what it received.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ansible_operator.errors import ApiError, Conflict, KubeUnavailable, NotFound
from ansible_operator.kube import deepjson
from ansible_operator.kube.client import MERGE_PATCH, Kube
from ansible_operator.kube.login import StaticLogin


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


@dataclass
class Received:
    method: str
    path: str
    content_type: str
    body: bytes


@dataclass
class Server:
    port: int
    documents: dict[str, bytes] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)


def _handler(server: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            server.received.append(
                Received(self.command, self.path, self.headers.get("Content-Type", ""), body)
            )
            status = server.statuses.get(self.path, 200)
            payload = server.documents.get(self.path, body)
            if status != 200:
                payload = json.dumps({"message": f"said {status}", "reason": "Test"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_PUT = do_PATCH = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(port=0)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = int(httpd.server_address[1])
    # A short poll interval: shutdown() waits for the loop to notice.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


def kube_for(port: int) -> Kube:
    return Kube(StaticLogin(host=f"http://127.0.0.1:{port}"), timeout=10)


@pytest.mark.parametrize("depth", [1, 600, 1500, 9_000])
def test_a_get_decodes_any_depth(server: Server, depth: int) -> None:
    server.documents["/obj"] = deepjson.dumps({"spec": nested(depth)}).encode()
    got = kube_for(server.port).request("GET", "/obj")
    assert deepjson.dumps(got) == server.documents["/obj"].decode()


@pytest.mark.parametrize(
    ("method", "content_type"),
    [("PUT", "application/json"), ("POST", "application/json"), ("PATCH", MERGE_PATCH)],
)
@pytest.mark.parametrize("depth", [1, 600, 1500, 9_000])
def test_a_body_of_any_depth_is_sent_as_compact_json(
    server: Server, method: str, content_type: str, depth: int
) -> None:
    body = {"metadata": {"name": "n"}, "spec": nested(depth)}
    echoed = kube_for(server.port).request(method, "/obj", body=body, content_type=content_type)
    [received] = server.received
    assert (received.method, received.content_type) == (method, content_type)
    assert received.body == deepjson.dumps(body).encode()
    assert deepjson.dumps(echoed) == deepjson.dumps(body)


def test_a_request_without_body_sends_none(server: Server) -> None:
    server.documents["/obj"] = b'{"kind": "Thing"}'
    assert kube_for(server.port).request("GET", "/obj") == {"kind": "Thing"}
    assert server.received[0].body == b""


@pytest.mark.parametrize("method", ["GET", "PUT"])
@pytest.mark.parametrize(
    ("status", "error"),
    [(404, NotFound), (409, Conflict), (422, ApiError), (503, KubeUnavailable)],
)
def test_error_statuses_keep_their_meaning_with_and_without_body(
    server: Server, method: str, status: int, error: type[Exception]
) -> None:
    server.statuses["/obj"] = status
    body = {"spec": nested(1500)} if method == "PUT" else None
    with pytest.raises(error, match=f"said {status}"):
        kube_for(server.port).request(method, "/obj", body=body)


@pytest.mark.parametrize("body", [None, {"spec": nested(1500)}], ids=["GET", "PUT"])
def test_an_unreachable_server_is_kube_unavailable(body: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connection refused
        with pytest.raises(KubeUnavailable):
            kube_for(port).request("PUT" if body else "GET", "/obj", body=body)
