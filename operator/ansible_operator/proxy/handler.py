"""One HTTP connection of the API proxy: authenticate, forward, stream, relay upgrades.

`proxy.server.ApiProxy` serves each client connection with a `ProxyHandler`
in its own thread (stdlib ThreadingHTTPServer: the operator's asyncio loop
belongs to kopf and must never wait on a run's request). The handler does the
HTTP plumbing; what a write's ownership is comes from `ApiProxy.plan` and
`ApiProxy.follow_up`, and the upstream side from `kube.upstream`.

Responses are relayed as they arrive: a response with a Content-Length is
copied in pieces, one without (watch events, followed logs) is re-chunked
chunk for chunk, so an event reaches the run as soon as the API server sends
it and nothing is held in memory whole.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

import urllib3

from ansible_operator.kube.upstream import REQUEST_READ_TIMEOUT, UpstreamError, shutdown_socket
from ansible_operator.proxy import readonly
from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.headers import copy_headers
from ansible_operator.proxy.ownership import RequestInfo, parse_request

if TYPE_CHECKING:
    import socket

    from ansible_operator.proxy.server import ApiProxy

log = logging.getLogger("ansible_operator.proxy")

_CHUNK = 64 * 1024
# The API server itself refuses bodies over 3 MiB; this only bounds memory.
_MAX_BODY = 64 * 1024 * 1024
# Bodies the API server never sends (RFC 9110 §6.4.1).
_NO_BODY = frozenset({204, 304})


class _ClientError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


def _bearer(value: str) -> str:
    scheme, _, token = value.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _is_stream(info: RequestInfo, target: str) -> bool:
    query = target.partition("?")[2].lower()
    return info.verb == "watch" or "follow=true" in query or "follow=1" in query


class ProxyHandler(BaseHTTPRequestHandler):
    """Serves the requests of one client connection (keep-alive)."""

    protocol_version = "HTTP/1.1"
    # Idle keep-alive and request-head reads; lifted while a response streams.
    timeout = 120
    # TCP_NODELAY, as Go's net/http sets on every connection: a response goes out
    # as two writes (head, then body), and with Nagle's algorithm on, the body waits
    # for the ACK of the head, which the client delays by 40 ms. That was 45 ms on
    # every request a run sent, 0.1 s of every kubernetes.core task.
    disable_nagle_algorithm = True
    server: Any  # proxy.server._Server; Any avoids an import cycle at run time

    @property
    def proxy(self) -> ApiProxy:
        proxy: ApiProxy = self.server.proxy
        return proxy

    def setup(self) -> None:
        super().setup()
        self.proxy.track(self.connection, on=True)

    def finish(self) -> None:
        self.proxy.track(self.connection, on=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("proxy %s: " + format, self.client_address[0], *args)

    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    # -- one request ---------------------------------------------------------

    def _handle(self) -> None:
        owner = self.proxy.credentials.lookup(_bearer(self.headers.get("Authorization", "")))
        if owner is None:
            self.close_connection = True  # the body was not read
            self._status(
                401, "Unauthorized", "a live run token is required (Authorization: Bearer)"
            )
            return
        if owner.read_only and self._refused(owner):
            return
        self.connection.settimeout(None)
        try:
            if "upgrade" in self.headers.get("Connection", "").lower():
                self._upgrade()
            else:
                self._exchange(owner, self._read_body())
        except _ClientError as err:
            self.close_connection = True
            self._status(err.code, err.reason, str(err))
        except UpstreamError as err:
            log.warning("API proxy: %s %s: %s", self.command, self.path, err)
            self._status(503, "ServiceUnavailable", f"the API server could not be reached: {err}")
        except OSError:
            self.close_connection = True  # the client went away mid-response
        finally:
            if not self.close_connection:
                self.connection.settimeout(self.timeout)

    def _refused(self, owner: Owner) -> bool:
        """A read-only run's request that cannot be dry-run: answer 403 (proxy.readonly)."""
        info = parse_request(self.command, self.path)
        upgrade = "upgrade" in self.headers.get("Connection", "").lower()
        why = readonly.refusal(self.command, info, upgrade=upgrade)
        if not why:
            return False
        self.close_connection = True  # the body was not read
        refused = readonly.DryRunWrite(
            method=self.command,
            target=self.path,
            info=info,
            content_type=self.headers.get("Content-Type", ""),
            body=b"",
            status=403,
            response=b"",
            refused=why,
        )
        self.proxy.dry_run_done(owner, refused)
        self._status(403, "Forbidden", why)
        return True

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as err:
            raise _ClientError(400, "BadRequest", "invalid Content-Length") from err
        if length > _MAX_BODY:
            raise _ClientError(413, "RequestEntityTooLarge", "request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError as err:
                raise _ClientError(400, "BadRequest", "malformed chunked body") from err
            if size == 0:
                while self.rfile.readline(1024).strip():
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > _MAX_BODY:
                raise _ClientError(413, "RequestEntityTooLarge", "request body too large")
            parts.append(self.rfile.read(size))
            self.rfile.readline(8)  # the CRLF after each chunk

    def _exchange(self, owner: Owner, body: bytes) -> None:
        proxy = self.proxy
        target = self.path
        # A read-only run's writes become server-side dry runs (proxy.readonly).
        recorded = owner.read_only and self.command in readonly.MUTATING
        if recorded:
            target = readonly.dry_run_target(target)
        info = parse_request(self.command, target)
        content_type = self.headers.get("Content-Type", "")
        screened = proxy.screen(owner, self.command, info, content_type, body)
        if screened.refusal:
            self._status(403, "Forbidden", screened.refusal)
            return
        plan, body = proxy.plan(owner, self.command, info, content_type, screened.body)
        headers = copy_headers(self.headers.items(), connection=self.headers.get("Connection", ""))
        follow = plan is not None and plan.needs_follow_up and not info.dry_run
        if follow or recorded:
            # The response is read here (to see whether the write created the
            # object, or for the plan): ask for it uncompressed.
            headers = {k: v for k, v in headers.items() if k.lower() != "accept-encoding"}
        stream = _is_stream(info, target)
        response = proxy.upstream.request(
            self.command,
            target,
            headers=headers,
            body=body if body or self.command in {"POST", "PUT", "PATCH"} else None,
            preload=follow or recorded,
            read_timeout=None if stream else REQUEST_READ_TIMEOUT,
        )
        if recorded:
            write = readonly.DryRunWrite(
                method=self.command,
                target=target,
                info=info,
                content_type=content_type,
                body=body,
                status=response.status,
                response=response.data,
            )
            proxy.dry_run_done(owner, write)
        if plan is not None and 200 <= response.status < 300 and not info.dry_run:
            if follow:
                query = self.path.partition("?")[2]
                response = proxy.follow_up(
                    owner, info=info, plan=plan, headers=headers, query=query, response=response
                )
            # Before the response goes out: the watch exists by the time the
            # run's task returns.
            proxy.touched(owner, plan)
        self._relay(response, preloaded=follow or recorded)

    # -- responses -----------------------------------------------------------

    def _status(self, code: int, reason: str, message: str) -> None:
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code,
            }
        ).encode()
        self.send_response(code)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _relay(self, response: urllib3.BaseHTTPResponse, *, preloaded: bool) -> None:
        proxy = self.proxy
        proxy.track(response, on=True)
        complete = False
        try:
            self.send_response(response.status, response.reason)
            headers = copy_headers(
                response.headers.items(),
                connection=response.headers.get("Connection", ""),
                drop=("date", "server"),
            )
            for name, value in headers.items():
                self.send_header(name, value)
            length = response.headers.get("Content-Length")
            if self.command == "HEAD" or response.status in _NO_BODY or response.status < 200:
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
            elif preloaded:
                data = response.data
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif length is not None:
                self.send_header("Content-Length", length)
                self.end_headers()
                for piece in response.stream(_CHUNK, decode_content=False):
                    self.wfile.write(piece)
            else:
                self._relay_chunked(response)
            complete = True
        finally:
            proxy.track(response, on=False)
            if complete:
                response.release_conn()
            else:
                # Unread bytes left: the connection cannot be reused.
                response.close()

    def _relay_chunked(self, response: urllib3.BaseHTTPResponse) -> None:
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        pieces = (
            response.read_chunked(decode_content=False)
            if getattr(response, "chunked", False)
            else iter(lambda: response.read1(_CHUNK, decode_content=False), b"")
        )
        for piece in pieces:
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    # -- upgrades (exec, attach, port-forward) -------------------------------

    def _upgrade(self) -> None:
        body = self._read_body()
        headers = copy_headers(self.headers.items())
        headers["Connection"] = "Upgrade"
        headers["Upgrade"] = self.headers.get("Upgrade", "")
        upstream, head, status, early = self.proxy.upstream.open_upgrade(
            self.command, self.path, headers, body
        )
        self.close_connection = True  # the connection is the stream's from now on
        try:
            self.connection.sendall(head + early)
            if status == 101:
                self._pump(upstream)
            else:
                self._pump_rest(upstream, head, early)
        finally:
            shutdown_socket(upstream)
            upstream.close()

    def _pump(self, upstream: socket.socket) -> None:
        """Copy bytes both ways until either side closes, then close both."""
        client = self.connection

        def client_to_upstream() -> None:
            try:
                while data := self.rfile.read1(_CHUNK):
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                # Exec/attach/port-forward speak SPDY or websocket framing with
                # their own close handshake: a TCP close ends the session.
                shutdown_socket(upstream)

        pump = threading.Thread(target=client_to_upstream, name="api-proxy-upgrade", daemon=True)
        pump.start()
        try:
            while data := upstream.recv(_CHUNK):
                client.sendall(data)
        except OSError:
            pass
        finally:
            shutdown_socket(client)
            pump.join(timeout=5)

    def _pump_rest(self, upstream: socket.socket, head: bytes, early: bytes) -> None:
        """A refused upgrade: relay the rest of the error response, then close."""
        length: int | None = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length" and value.strip().isdigit():
                length = int(value.strip())
        if length is None:
            # No length: copy until the API server closes or goes quiet.
            upstream.settimeout(10)
        remaining = _MAX_BODY if length is None else length - len(early)
        try:
            while remaining > 0:
                data = upstream.recv(min(_CHUNK, remaining))
                if not data:
                    break
                self.connection.sendall(data)
                remaining -= len(data)
        except TimeoutError:
            pass
