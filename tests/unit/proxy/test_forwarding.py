"""The proxy's HTTP plumbing against a scripted upstream on loopback (no cluster).

A small HTTP server plays the API server so that what a real one cannot show
here is observable: the exact headers that arrive upstream, a stream whose
second chunk is only sent after the client has seen the first (no
buffering), and a connection upgrade answered with 101 and then echoed (the
testbed's kwok nodes run no containers, so exec/attach cannot reach a 101).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.errors import ConfigError
from ansible_operator.kube.client import Kube
from ansible_operator.kube.librarylogin import LibraryLogin
from ansible_operator.proxy import ApiProxy, Owner, RunCredentials

OWNER = Owner("v1", "ConfigMap", "owner", "ns1", "uid-1", "configmap-v1-controller")
PROTOBUF = "application/vnd.kubernetes.protobuf"


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def _send(
        self, code: int, body: bytes, content_type: str = "application/json", **extra: str
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/upgrade"):
            self._upgrade()
        elif self.path.startswith("/stream"):
            self._stream()
        elif self.path.startswith("/protobuf"):
            self._send(200, b"\x6b\x38\x73\x00\x01\xff", PROTOBUF)
        elif self.path.startswith("/teapot"):
            self._send(418, b'{"kind":"Status","code":418}', X_Custom="yes")
        else:
            echo = {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode(),
            }
            self._send(201 if self.command == "POST" else 200, json.dumps(echo).encode())

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in (b'{"type":"ADDED"}\n', b'{"type":"MODIFIED"}\n'):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
            # The second event only once the test has received the first.
            _Upstream.release.wait(10)
        self.wfile.write(b"0\r\n\r\n")

    def _upgrade(self) -> None:
        if "upgrade" not in self.headers.get("Connection", "").lower() or self.path.endswith(
            "refuse"
        ):
            self.close_connection = True
            self._send(400, b'{"message":"upgrade refused"}')
            return
        self.wfile.write(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            b"Upgrade: " + self.headers["Upgrade"].encode() + b"\r\n\r\nHELLO"
        )
        self.close_connection = True
        while data := self.connection.recv(1024):
            self.connection.sendall(data.upper())


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients cut off by the proxy's stop() are expected here


@pytest.fixture
def upstream() -> Iterator[str]:
    server = _QuietServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Upstream.release.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Upstream.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def issued() -> tuple[RunCredentials, str]:
    creds = RunCredentials()
    return creds, creds.issue(OWNER).token


@pytest.fixture
def proxy(upstream: str, issued: tuple[RunCredentials, str]) -> Iterator[ApiProxy]:
    refreshes = iter(range(1, 1_000_000))

    def refresh(configuration: client.Configuration) -> None:
        # Like an in-cluster token file that is rotated: read anew each time.
        configuration.api_key["authorization"] = f"operator-{next(refreshes)}"

    configuration = client.Configuration(host=upstream)
    configuration.api_key_prefix["authorization"] = "Bearer"
    configuration.refresh_api_key_hook = refresh
    proxy = ApiProxy(
        upstream=LibraryLogin(configuration),
        credentials=issued[0],
        kube=Kube(LibraryLogin(configuration)),
        inject_owner_ref=False,
    )
    proxy.start()
    yield proxy
    proxy.stop()


def request(
    proxy: ApiProxy,
    method: str,
    path: str,
    *,
    token: str | None,
    body: bytes | None = None,
    **headers: str,
) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=body, headers=sent)
    return conn.getresponse()


def test_requests_without_a_live_token_get_401(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    for token in (None, "made-up", ""):
        response = request(proxy, "GET", "/api/v1/namespaces", token=token)
        assert response.status == 401
        assert json.loads(response.read())["reason"] == "Unauthorized"
    creds, token = issued
    creds.revoke(token)
    assert request(proxy, "GET", "/api/v1/namespaces", token=token).status == 401


def test_request_forwarded_with_the_operators_identity(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    body = b'{"metadata":{"name":"x"}}'
    response = request(
        proxy,
        "POST",
        "/api/v1/namespaces/ns1/configmaps?fieldManager=m&dryRun=All",
        token=issued[1],
        body=body,
        Content_Type="application/json",
        Accept=f"{PROTOBUF}, application/json;as=Table;v=v1;g=meta.k8s.io",
        User_Agent="kubernetes.core",
        Impersonate_User="someone",
    )
    assert response.status == 201
    echo = json.loads(response.read())
    assert echo["method"] == "POST"
    assert echo["path"] == "/api/v1/namespaces/ns1/configmaps?fieldManager=m&dryRun=All"
    assert echo["body"] == body.decode()
    headers = echo["headers"]
    # The run's token never leaves the proxy; the operator's (refreshed) one does.
    assert headers["authorization"].startswith("Bearer operator-")
    assert issued[1] not in json.dumps(echo)
    assert headers["accept"] == f"{PROTOBUF}, application/json;as=Table;v=v1;g=meta.k8s.io"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == "kubernetes.core"
    assert headers["impersonate-user"] == "someone"


def test_upstream_token_is_refreshed_per_request(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    seen = {
        json.loads(request(proxy, "GET", "/api/v1/pods", token=issued[1]).read())["headers"][
            "authorization"
        ]
        for _ in range(3)
    }
    assert len(seen) == 3


def test_status_headers_and_binary_bodies_pass_unchanged(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    teapot = request(proxy, "GET", "/teapot", token=issued[1])
    assert teapot.status == 418
    assert teapot.getheader("X-Custom") == "yes"
    assert teapot.read() == b'{"kind":"Status","code":418}'
    raw = request(proxy, "GET", "/protobuf", token=issued[1], Accept=PROTOBUF)
    assert raw.getheader("Content-Type") == PROTOBUF
    assert raw.read() == b"\x6b\x38\x73\x00\x01\xff"


def test_keep_alive_connection_serves_several_requests(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    for i in range(3):
        conn.request("GET", f"/api/v1/x{i}", headers={"Authorization": f"Bearer {issued[1]}"})
        assert json.loads(conn.getresponse().read())["path"] == f"/api/v1/x{i}"


def test_stream_chunks_arrive_before_the_stream_ends(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    response = request(proxy, "GET", "/stream?watch=true", token=issued[1])
    assert response.status == 200
    # The upstream holds its second event until we have the first: a proxy
    # that buffered the stream would deadlock here (and time out).
    assert json.loads(response.readline()) == {"type": "ADDED"}
    _Upstream.release.set()
    assert json.loads(response.readline()) == {"type": "MODIFIED"}
    assert response.read() == b""


def _raw_request(proxy: ApiProxy, head: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.sendall(head.encode())
    return sock


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(1024)
        if not chunk:
            break
        data += chunk
    return data


def test_upgrade_relays_bytes_both_ways(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    sock = _raw_request(
        proxy,
        "POST /upgrade/api/v1/namespaces/ns1/pods/p/exec?command=sh HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: Bearer {issued[1]}\r\n"
        "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n",
    )
    head = _read_until(sock, b"HELLO")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols")
    assert b"Upgrade: SPDY/3.1" in head
    for word in (b"abc", b"stdin data"):
        sock.sendall(word)
        assert _read_until(sock, word.upper()).endswith(word.upper())
    sock.close()


def test_refused_upgrade_relays_the_error(
    proxy: ApiProxy, issued: tuple[RunCredentials, str]
) -> None:
    sock = _raw_request(
        proxy,
        f"GET /upgrade-refuse HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {issued[1]}\r\n"
        "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    )
    reply = _read_until(sock, b"upgrade refused")
    assert reply.startswith(b"HTTP/1.1 400")
    assert reply.endswith(b'{"message":"upgrade refused"}')
    sock.close()


def test_upgrade_without_a_token_is_refused(proxy: ApiProxy) -> None:
    sock = _raw_request(
        proxy,
        "GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n",
    )
    assert _read_until(sock, b"\r\n").startswith(b"HTTP/1.1 401")
    sock.close()


def test_stop_ends_streams_in_flight(proxy: ApiProxy, issued: tuple[RunCredentials, str]) -> None:
    response = request(proxy, "GET", "/stream?watch=true", token=issued[1])
    assert json.loads(response.readline()) == {"type": "ADDED"}
    proxy.stop()
    started = time.monotonic()
    # The chunked stream is cut off: an incomplete read, at once (not a
    # client timeout, and not the second event, which upstream still holds).
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    assert time.monotonic() - started < 5


def test_unreachable_upstream_is_503(issued: tuple[RunCredentials, str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connection refused
        configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
        proxy = ApiProxy(
            upstream=LibraryLogin(configuration),
            credentials=issued[0],
            kube=Kube(LibraryLogin(configuration)),
            inject_owner_ref=False,
        )
        proxy.start()
        try:
            response = request(proxy, "GET", "/api/v1/pods", token=issued[1])
            assert response.status == 503
        finally:
            proxy.stop()


@pytest.mark.parametrize(
    "bind", ["0.0.0.0:0", "192.0.2.1:8888", "example.com:1", "127.0.0.1", "[::]:0"]
)
def test_only_loopback_binds(bind: str) -> None:
    configuration = client.Configuration(host="http://127.0.0.1:1")
    with pytest.raises(ConfigError):
        ApiProxy(
            upstream=LibraryLogin(configuration),
            credentials=RunCredentials(),
            kube=Kube(LibraryLogin(configuration)),
            inject_owner_ref=True,
            bind=bind,
        )


def test_a_busy_port_is_a_config_error_naming_it() -> None:
    configuration = client.Configuration(host="http://127.0.0.1:1")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proxy = ApiProxy(
            upstream=LibraryLogin(configuration),
            credentials=RunCredentials(),
            kube=Kube(LibraryLogin(configuration)),
            inject_owner_ref=True,
            bind=f"127.0.0.1:{port}",
        )
        with pytest.raises(
            ConfigError, match=rf"cannot listen on 127\.0\.0\.1:{port} \(--proxy-port\): .*in use"
        ):
            proxy.start()
