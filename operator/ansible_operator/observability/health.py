"""Liveness and readiness probes, and the HTTP plumbing every operator endpoint shares.

Where this sits: the `run` command starts a `HealthServer` on
`--health-probe-bind-address` (default ":6789", from config.defaults) before
anything is watched, and passes it a `ready` callable owned by the controller
(ready once the watches are running; the callable says why not otherwise).
The kubelet polls `/healthz` (liveness) and `/readyz` (readiness).

Paths and bodies follow controller-runtime's healthz handler as the Go
operator configures it: liveness checks `healthz` and `ping`, readiness
check `readyz`; `/healthz/<check>` and `/readyz/<check>` probe one check;
`?verbose` lists every check (`[+]ping ok`, ... `healthz check passed`);
`?exclude=<check>` skips one. One difference: a failing check shows its
reason (`[-]readyz failed: <reason>`) instead of "reason withheld"; the
reasons are ours, never secrets, and they save a trip to the logs.

`EndpointServer` below is the plumbing `observability.metrics.MetricsServer`
also uses: Go's listen-address syntax, a stdlib `ThreadingHTTPServer` in a
daemon thread (kopf owns the asyncio loop; probes must answer even when that
loop is busy) that sleeps until a client comes (observability/serving.py), and
a `BindError` naming the flag when the port is taken.
"""

from __future__ import annotations

import logging
import posixpath
import socket
import socketserver
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final
from urllib.parse import parse_qs, urlsplit

from ansible_operator.errors import ConfigError
from ansible_operator.observability.serving import Serving

__all__ = [
    "BindAddress",
    "BindError",
    "EndpointServer",
    "HealthServer",
    "Request",
    "Response",
    "not_found",
    "parse_bind_address",
]

_log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class BindError(ConfigError):
    """A bind address that is malformed or cannot be listened on; the operator must exit."""


@dataclass(frozen=True, slots=True)
class Request:
    """What an endpoint handler sees of a GET or HEAD request."""

    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # keys lower-cased


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)


EndpointHandler = Callable[[Request], Response]


def not_found() -> Response:
    """Go's http.NotFound, byte for byte."""
    return Response(404, b"404 page not found\n", headers={"X-Content-Type-Options": "nosniff"})


@dataclass(frozen=True, slots=True)
class BindAddress:
    host: str  # "" = every interface
    port: int  # 0 = any free port


def parse_bind_address(text: str, *, flag: str) -> BindAddress | None:
    """Read a Go listen address ("host:port", ":port", "[v6]:port"); None when disabled ("0", "").

    controller-runtime disables a server with "0"; we also treat "" as off
    rather than guessing a port.
    """
    if text in {"0", ""}:
        return None
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        if not sep:
            raise BindError(f"{flag}={text!r}: expected [ipv6-host]:port")
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            raise BindError(f'{flag}={text!r}: missing port in address (e.g. ":8080")')
        if ":" in host:
            raise BindError(f"{flag}={text!r}: too many colons; write IPv6 hosts as [host]:port")
    try:
        # Go reads an empty port as 0 and accepts service names ("http").
        number = int(port or "0") if port.isdigit() or not port else socket.getservbyname(port)
    except OSError:
        raise BindError(f"{flag}={text!r}: unknown port {port!r}") from None
    if not 0 <= number <= 65535:
        raise BindError(f"{flag}={text!r}: port {number} is out of range 0-65535")
    return BindAddress(host=host, port=number)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client must never keep the operator from exiting
    request_queue_size = 128  # probes, scrapes and many roles' osdk_metric calls at once

    def __init__(
        self, address: tuple[str, int], *, family: int, dual_stack: bool, handler: EndpointHandler
    ) -> None:
        self.address_family = family
        self.dual_stack = dual_stack
        self.handler = handler
        super().__init__(address, _RequestHandler)

    def server_bind(self) -> None:
        if self.dual_stack:  # ":port" means IPv4 and IPv6, as in Go
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        # Not HTTPServer.server_bind: its reverse DNS lookup can stall start-up.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def handle_error(self, request: object, client_address: object) -> None:
        # socketserver would print a traceback to stderr, outside the JSON log;
        # mostly a client that went away mid-response, so debug level.
        _log.debug("HTTP connection failed", exc_info=True)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for scrapers that reuse connections
    timeout = 30  # seconds an idle keep-alive connection may hold its thread
    disable_nagle_algorithm = True  # head and body are two writes: no 40 ms ACK wait

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, *, send_body: bool) -> None:
        assert isinstance(self.server, _Server)
        url = urlsplit(self.path)
        request = Request(
            path=url.path,
            query=parse_qs(url.query, keep_blank_values=True),
            headers={key.lower(): value for key, value in self.headers.items()},
        )
        try:
            response = self.server.handler(request)
        except Exception:
            _log.exception("HTTP handler failed", extra={"path": url.path})
            response = Response(500, b"internal server error\n")
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:
        # Probes hit us every few seconds: access logs stay at debug level.
        _log.debug("HTTP %s", format % args, extra={"client": self.client_address[0]})


class EndpointServer:
    """One HTTP endpoint served from a daemon thread; the base of the metrics and probe servers.

    `bind` is parsed at construction (a bad flag fails early); `start()` binds
    and raises `BindError` naming the flag and address when it cannot.
    """

    def __init__(self, *, bind: str, what: str, flag: str, handler: EndpointHandler) -> None:
        self._what = what
        self._flag = flag
        self._bind_text = bind
        self._address = parse_bind_address(bind, flag=flag)
        self._handler = handler
        self._server: _Server | None = None
        self._serving: Serving | None = None
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    @property
    def port(self) -> int | None:
        """The port actually listened on (useful with port 0); None when not serving."""
        return None if self._server is None else self._server.server_port

    def start(self) -> None:
        """Bind and serve in a daemon thread; does nothing when disabled or already serving."""
        if self._address is None or self._server is not None:
            return
        family, address, dual_stack = self._resolve(self._address)
        try:
            server = _Server(address, family=family, dual_stack=dual_stack, handler=self._handler)
        except OSError as err:
            reason = err.strerror or str(err)
            raise BindError(
                f"{self._what}: cannot listen on {self._flag}={self._bind_text!r}: {reason}"
            ) from err
        self._server = server
        self._serving = Serving(server)
        self._thread = threading.Thread(target=self._serving.run, name=self._what, daemon=True)
        self._thread.start()
        _log.info("Serving %s", self._what, extra={"address": self._bind_text, "port": self.port})

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice or before start()."""
        server, serving, thread = self._server, self._serving, self._thread
        self._server, self._serving, self._thread = None, None, None
        if server is None:
            return
        if serving is not None:
            serving.stop()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def _resolve(self, address: BindAddress) -> tuple[int, tuple[str, int], bool]:
        if not address.host:
            if socket.has_dualstack_ipv6():
                return socket.AF_INET6, ("::", address.port), True
            return socket.AF_INET, ("0.0.0.0", address.port), False  # noqa: S104 - ":port" asks for it
        try:
            infos = socket.getaddrinfo(
                address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except OSError as err:
            raise BindError(
                f"{self._what}: cannot resolve {self._flag}={self._bind_text!r}: {err}"
            ) from err
        family, _, _, _, sockaddr = infos[0]
        return family, (str(sockaddr[0]), int(sockaddr[1])), False

    def __enter__(self) -> EndpointServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


_TEXT: Final = "text/plain; charset=utf-8"
_NOSNIFF: Final = {"X-Content-Type-Options": "nosniff"}


def _ping() -> tuple[bool, str]:
    return True, ""


class HealthServer(EndpointServer):
    """`/healthz` and `/readyz` on `--health-probe-bind-address`; "0" disables it.

    `ready` is called from the server's threads on every readiness probe: it
    must be thread-safe and quick, returning (True, "") or (False, reason).
    """

    def __init__(self, *, bind: str, ready: Check) -> None:
        self._groups: dict[str, dict[str, Check]] = {
            "/healthz": {"healthz": _ping, "ping": _ping},
            "/readyz": {"readyz": ready},
        }
        super().__init__(
            bind=bind,
            what="health probe server",
            flag="--health-probe-bind-address",
            handler=self._serve,
        )

    def _serve(self, request: Request) -> Response:
        path = posixpath.normpath(request.path or "/")
        for prefix, checks in self._groups.items():
            if path == prefix:
                return _aggregate(checks, request.query)
            if path.startswith(prefix + "/"):
                name = path[len(prefix) + 1 :]
                check = checks.get(name)
                return not_found() if check is None else _single(name, check)
        return not_found()


def _run(name: str, check: Check) -> tuple[bool, str]:
    try:
        healthy, reason = check()
    except Exception:
        _log.exception("Health check raised", extra={"checker": name})
        return False, f"the {name} check raised an error"
    # One line per check in the verbose body, whatever the reason contains.
    return healthy, " ".join(reason.split())


def _single(name: str, check: Check) -> Response:
    healthy, reason = _run(name, check)
    if healthy:
        return Response(200, b"ok", content_type=_TEXT)
    body = f"internal server error: {reason or 'not ready'}\n".encode()
    return Response(500, body, content_type=_TEXT, headers=_NOSNIFF)


def _aggregate(checks: Mapping[str, Check], query: Mapping[str, list[str]]) -> Response:
    excluded = set(query.get("exclude", []))
    lines: list[str] = []
    failed = False
    for name in sorted(checks):
        if name in excluded:
            excluded.discard(name)
            lines.append(f"[+]{name} excluded: ok")
            continue
        healthy, reason = _run(name, checks[name])
        if healthy:
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: {reason or 'reason withheld'}")
            _log.debug("Health check failed", extra={"checker": name, "reason": reason})
    if not failed and "verbose" not in query:
        return Response(200, b"ok", content_type=_TEXT, headers=_NOSNIFF)
    if excluded:
        quoted = ",".join(f'"{name}"' for name in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
    lines.append("healthz check failed" if failed else "healthz check passed")
    body = "".join(f"{line}\n" for line in lines).encode()
    return Response(500 if failed else 200, body, content_type=_TEXT, headers=_NOSNIFF)
