"""The API proxy's client connections: Nagle's algorithm off, as Go's net/http does.

A response leaves the proxy as two writes (head, then body). With Nagle's algorithm
on, the body waits for the ACK of the head, which the client delays by 40 ms: every
request of every run paid it (measured: 45-48 ms a request through the proxy against
2-3 ms direct). What is checked here is the socket option on the proxy's side of a
real connection, never a duration.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from ansible_operator.proxy.credentials import Owner
from testbed.probes import wait_until
from tests.proxy.conftest import Running


def test_the_proxy_answers_with_nagles_algorithm_off(
    start_proxy: Callable[..., Running], make_owner: Callable[..., Owner], namespace: str
) -> None:
    running = start_proxy()
    token = running.credentials.issue(make_owner(namespace, "o"))
    with socket.create_connection(("127.0.0.1", running.proxy.port), timeout=10) as conn:
        request = (
            f"GET /api/v1/namespaces/{namespace}/configmaps HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {token.token}\r\n\r\n"
        )
        conn.sendall(request.encode())
        assert conn.recv(64).startswith(b"HTTP/1.1 200")
        # The connection stays open (keep-alive): its server side is tracked.
        served = running.proxy._sockets
        wait_until("the proxy tracks the connection", lambda: bool(served), timeout=10)
        for accepted in list(served):
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
