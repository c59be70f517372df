"""Serving a socketserver from a thread that sleeps until a client or `stop()` comes.

Where this sits: every HTTP endpoint of the operator (health probes, metrics and
user metrics through observability.health's `EndpointServer`, and the API proxy,
proxy/server.py) runs its server's loop here instead of `serve_forever`.

Why: `serve_forever(poll_interval)` wakes every interval to see whether
`shutdown()` was called, and `shutdown()` waits for that wake-up. With four
servers at 0.1 s, the idle operator woke 40 times a second for nothing (its only
wake-ups at rest), and stopping it waited up to 0.1 s per server, one after the
other. Here the loop waits on the listening socket and a pipe without a timeout:
a connection is served at once, a byte in the pipe ends the loop at once.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socketserver
import threading

__all__ = ["Serving"]

_CLIENT = object()  # marks the listening socket among the selector's keys


class Serving:
    """The serve loop of one server: `run` in a thread, `stop` from anywhere."""

    def __init__(self, server: socketserver.TCPServer) -> None:
        self._server = server
        # handle_request() below selects once more on the listening socket; with 0 it
        # never blocks if a client that made the socket readable has gone meanwhile.
        server.timeout = 0
        self._wake_read, self._wake_write = os.pipe()
        self._stopping = False
        self._ended = threading.Event()

    def run(self) -> None:
        """Serve until `stop()`; the thread's target."""
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._server.fileno(), selectors.EVENT_READ, _CLIENT)
                selector.register(self._wake_read, selectors.EVENT_READ)
                while True:
                    ready = selector.select()
                    if self._stopping:  # set before stop() writes to the pipe
                        break
                    if any(key.data is _CLIENT for key, _ in ready):
                        self._server.handle_request()
                    self._server.service_actions()
        finally:
            self._ended.set()

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop and wait (at most `timeout`) for it; the server stays open
        (the caller closes it). Safe to call twice."""
        if self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        if self._ended.wait(timeout):  # else the loop still holds the pipe: leave it
            os.close(self._wake_read)
            os.close(self._wake_write)
