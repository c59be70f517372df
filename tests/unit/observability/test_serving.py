"""observability/serving.py: a server's loop serves clients and ends on `stop()`, without
polling (the operator's idle threads sleep; a stop does not wait for a poll interval)."""

from __future__ import annotations

import selectors
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ansible_operator.observability.serving import Serving


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(self.rfile.readline().upper())


@pytest.fixture
def server() -> Iterator[socketserver.ThreadingTCPServer]:
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo) as tcp:
        tcp.daemon_threads = True
        yield tcp


def _start(serving: Serving) -> threading.Thread:
    thread = threading.Thread(target=serving.run, daemon=True)
    thread.start()
    return thread


def _ask(server: socketserver.TCPServer, line: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", int(server.server_address[1])), timeout=10) as sock:
        sock.sendall(line)
        return sock.makefile("rb").readline()


def test_serves_clients_until_stopped(server: socketserver.ThreadingTCPServer) -> None:
    serving = Serving(server)
    thread = _start(serving)
    assert _ask(server, b"one\n") == b"ONE\n"
    assert _ask(server, b"two\n") == b"TWO\n"
    serving.stop()
    assert not thread.is_alive()  # stop() waits for the loop to end
    serving.stop()  # a second stop is harmless


def test_a_stop_before_the_loop_runs_ends_it_at_once(
    server: socketserver.ThreadingTCPServer,
) -> None:
    serving = Serving(server)
    stopper = threading.Thread(target=serving.stop)
    stopper.start()  # waits for the loop, which sees the stop as soon as it starts
    thread = _start(serving)
    stopper.join(10)
    thread.join(10)
    assert not stopper.is_alive()
    assert not thread.is_alive()


def test_the_loop_never_wakes_up_on_a_timer(
    server: socketserver.ThreadingTCPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeouts: list[Any] = []
    select = selectors.DefaultSelector.select

    def recording(self: selectors.BaseSelector, timeout: float | None = None) -> Any:
        timeouts.append(timeout)
        return select(self, timeout)  # type: ignore[arg-type]

    monkeypatch.setattr(selectors.DefaultSelector, "select", recording)
    serving = Serving(server)
    thread = _start(serving)
    assert _ask(server, b"x\n") == b"X\n"
    serving.stop()
    thread.join(10)
    assert timeouts
    assert all(timeout is None for timeout in timeouts)
