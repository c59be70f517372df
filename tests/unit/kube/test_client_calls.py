"""kube.client.Kube's typed calls: what goes on the wire and what comes back.

A local HTTP server stands in for the API server: it records each request's
method, path and query, and answers from a table; watch requests get a
stream of JSON lines, then stay open until the test lets them end.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ansible_operator.errors import ApiError, KubeUnavailable
from ansible_operator.kube.client import Kube, ResourceInfo, WatchEvent, is_gone
from ansible_operator.kube.login import StaticLogin

LEASES = ResourceInfo("coordination.k8s.io", "v1", "Lease", "leases", True, False)
LEASES_PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


@dataclass
class Server:
    port: int = 0
    answers: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    lines: list[Any] = field(default_factory=list)  # a watch's events
    received: list[tuple[str, str, list[tuple[str, str]], bytes]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(server: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qsl(url.query)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            server.received.append((self.command, url.path, query, body))
            if ("watch", "true") in query and (self.command, url.path) not in server.answers:
                self._stream()
                return
            status, answer = server.answers.get((self.command, url.path), (200, {}))
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in server.lines:
                data = (line if isinstance(line, str) else json.dumps(line)) + "\n"
                self.wfile.write(f"{len(data):x}\r\n{data}\r\n".encode())
                self.wfile.flush()
            server.release.wait(10)  # a quiet watch, until the test ends it
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_PUT = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def kube(server: Server) -> Kube:
    return Kube(StaticLogin(host=f"http://127.0.0.1:{server.port}"), timeout=10)


def test_list_page_sends_selector_limit_and_token_and_reads_the_page(
    server: Server, kube: Kube
) -> None:
    items = [{"metadata": {"name": "a"}}]
    meta = {"resourceVersion": "42", "continue": "next"}
    server.answers[("GET", LEASES_PATH)] = (200, {"items": items, "metadata": meta})
    page = kube.list_page(
        LEASES, namespace="ns", label_selector="g=x", limit=5, continue_token="tok"
    )
    assert (page.items, page.resource_version, page.continue_token) == (items, "42", "next")
    assert server.received[-1][2] == [("labelSelector", "g=x"), ("limit", "5"), ("continue", "tok")]
    kube.list_page(LEASES, namespace="ns")
    assert server.received[-1][2] == []  # no limit: one unpaged list


def test_list_names_pages_through_list_page(server: Server, kube: Kube) -> None:
    server.answers[("GET", "/apis/coordination.k8s.io/v1/leases")] = (
        200,
        {"items": [{"metadata": {"name": "a", "namespace": "ns"}}], "metadata": {}},
    )
    assert kube.list_names(LEASES) == {("ns", "a")}
    assert server.received[-1][2] == [("limit", "500")]


def test_replace_puts_the_object_at_its_own_path(server: Server, kube: Kube) -> None:
    obj = {"metadata": {"name": "l", "namespace": "ns", "resourceVersion": "3"}, "spec": {}}
    server.answers[("PUT", f"{LEASES_PATH}/l")] = (200, {**obj, "x": 1})
    assert kube.replace(LEASES, obj)["x"] == 1
    method, path, _, body = server.received[-1]
    assert (method, path, json.loads(body)) == ("PUT", f"{LEASES_PATH}/l", obj)


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        ({"kind": "Status", "status": "Success"}, False),
        ({"kind": "Lease", "metadata": {"name": "l"}}, False),
        (
            {"kind": "Lease", "metadata": {"deletionTimestamp": "t", "finalizers": ["f"]}},
            True,
        ),
    ],
)
def test_delete_returns_the_object_only_while_finalizers_hold_it(
    server: Server, kube: Kube, answer: dict[str, Any], left: bool
) -> None:
    server.answers[("DELETE", f"{LEASES_PATH}/l")] = (200, answer)
    assert kube.delete(LEASES, namespace="ns", name="l") == (answer if left else None)


def test_a_watch_streams_events_and_bookmarks_then_ends(server: Server, kube: Kube) -> None:
    added = {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}}
    mark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
    server.lines = [added, "", mark]
    server.release.set()
    stream = kube.watch(LEASES, namespace="ns", resource_version="4", timeout_seconds=7)
    try:
        events = list(stream)
    finally:
        stream.close()
    assert events == [WatchEvent("ADDED", added["object"]), WatchEvent("BOOKMARK", mark["object"])]
    assert events[1].resource_version == "9"
    assert server.received[-1][2] == [
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", "4"),
        ("timeoutSeconds", "7"),
    ]


def test_an_error_event_of_410_is_gone_and_others_unavailable(server: Server, kube: Kube) -> None:
    server.lines = [{"type": "ERROR", "object": {"code": 410, "message": "too old"}}]
    server.release.set()
    stream = kube.watch(LEASES, resource_version="1")
    with pytest.raises(ApiError) as raised:
        list(stream)
    stream.close()
    assert is_gone(raised.value)
    server.lines = [{"type": "ERROR", "object": {"code": 500, "message": "etcd"}}]
    stream = kube.watch(LEASES, resource_version="1")
    with pytest.raises(KubeUnavailable, match="etcd"):
        list(stream)
    stream.close()


def test_a_410_answer_to_the_watch_request_is_gone(server: Server, kube: Kube) -> None:
    server.answers[("GET", "/apis/coordination.k8s.io/v1/leases")] = (410, {"message": "gone"})
    with pytest.raises(ApiError) as raised:
        kube.watch(LEASES, resource_version="1")
    assert is_gone(raised.value)


def test_a_line_that_is_not_json_is_kube_unavailable(server: Server, kube: Kube) -> None:
    server.lines = ["{not json"]
    server.release.set()
    stream = kube.watch(LEASES, resource_version="1")
    with pytest.raises(KubeUnavailable):
        list(stream)
    stream.close()


def test_stop_from_another_thread_ends_a_waiting_read(server: Server, kube: Kube) -> None:
    server.lines = [{"type": "ADDED", "object": {"metadata": {"name": "a"}}}]
    stream = kube.watch(LEASES, resource_version="1")
    seen: list[WatchEvent] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            seen.extend(stream)
        except KubeUnavailable as err:  # how a shut-down read may end
            failed.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    stream.stop()
    reader.join(5)
    assert not reader.is_alive()
    stream.close()
    assert [e.type for e in seen] == ["ADDED"]
