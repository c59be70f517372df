"""The API proxy's side towards the real API server: requests with the operator's identity.

Where it sits: in the kube layer, because it is the operator's own login to
the API server, built from the same `kubernetes.client.Configuration` as its
`Kube`; only the API proxy uses it (proxy.server builds one `Upstream`,
proxy.handler sends each forwarded request through it). Every request a
run sends is re-sent from here with the operator's credentials (client
certificate and key, CA, bearer token, basic auth), never the run's. Plain
requests go through one pooled urllib3 PoolManager built exactly as the
kubernetes client builds its own (same TLS settings, same HTTP proxy
settings); connection upgrades (exec, attach, port-forward) get a raw TLS
socket of their own, since after the 101 the connection is no longer HTTP.

The bearer token is read per request through the Configuration's
`auth_settings()`, which runs its `refresh_api_key_hook`: in-cluster service
account tokens rotate, and a token read once at start-up would expire.
`Configuration` is re-exported for the proxy's signatures, so the
`kubernetes` package is imported only in this layer.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import urllib.parse
from collections.abc import Mapping

import urllib3
from kubernetes.client import Configuration, rest

__all__ = [
    "CONNECT_TIMEOUT",
    "REQUEST_READ_TIMEOUT",
    "Configuration",
    "Upstream",
    "UpstreamError",
    "shutdown_socket",
]

_MAX_HEAD = 64 * 1024
# Reads of ordinary requests: generous (large lists, slow admission webhooks)
# but finite, so a hung API server cannot pin a proxy thread for ever.
REQUEST_READ_TIMEOUT = 300.0
CONNECT_TIMEOUT = 15.0


class UpstreamError(Exception):
    """The API server could not be reached or spoke something other than HTTP."""


class Upstream:
    """Requests to the API server with the operator's credentials."""

    def __init__(self, configuration: Configuration) -> None:
        self.configuration = configuration
        self.base = str(configuration.host).rstrip("/")
        parts = urllib.parse.urlsplit(self.base)
        self.scheme = parts.scheme or "https"
        self.hostname = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        self.path_prefix = parts.path.rstrip("/")  # e.g. Rancher's /k8s/clusters/<id>
        self.pool: urllib3.PoolManager = rest.RESTClientObject(configuration).pool_manager

    def auth_headers(self) -> dict[str, str]:
        """The operator's Authorization header, refreshed if the Configuration can."""
        # Runs the refresh hook first (rotated service-account tokens, exec
        # plugins), then reads the key under either name the client uses.
        bearer = self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if bearer:
            return {"Authorization": str(bearer)}
        if self.configuration.username or self.configuration.password:
            return {"Authorization": str(self.configuration.get_basic_auth_token())}
        return {}  # client certificate only

    def request(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        preload: bool,
        read_timeout: float | None = REQUEST_READ_TIMEOUT,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request. Without `preload` the body is left unread (and never decoded).

        `read_timeout` None is for streams (watches, followed logs), which may
        be quiet for minutes.
        """
        merged = {**headers, **self.auth_headers()}
        try:
            return self.pool.urlopen(
                method,
                self.base + target,
                body=body,
                headers=merged,
                preload_content=preload,
                decode_content=False,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=read_timeout),
            )
        except urllib3.exceptions.HTTPError as err:
            raise UpstreamError(str(err)) from err

    def _tls_context(self) -> ssl.SSLContext:
        cfg = self.configuration
        if cfg.verify_ssl:
            context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
            if cfg.ca_cert_data:
                context.load_verify_locations(cadata=cfg.ca_cert_data)
            if cfg.assert_hostname is False:
                context.check_hostname = False
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
        return context

    def connect_raw(self) -> socket.socket:
        """A fresh connection (TLS if https) for an upgrade; the caller closes it."""
        try:
            sock = socket.create_connection((self.hostname, self.port), timeout=CONNECT_TIMEOUT)
        except OSError as err:
            raise UpstreamError(f"connect {self.hostname}:{self.port}: {err}") from err
        if self.scheme != "https":
            return sock
        server_name = self.configuration.tls_server_name or self.hostname
        try:
            return self._tls_context().wrap_socket(sock, server_hostname=server_name)
        except (ssl.SSLError, OSError) as err:
            sock.close()
            raise UpstreamError(f"TLS to {self.hostname}:{self.port}: {err}") from err

    def open_upgrade(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[socket.socket, bytes, int, bytes]:
        """Send an upgrade request; return (socket, raw response head, status, early bytes).

        The head is relayed to the client byte for byte; `early` is whatever
        followed it in the same reads (the first frames after a 101).
        """
        sock = self.connect_raw()
        lines = [f"{method} {self.path_prefix}{target} HTTP/1.1", f"Host: {self._host_header()}"]
        lines += [f"{k}: {v}" for k, v in {**headers, **self.auth_headers()}.items()]
        if body:
            lines.append(f"Content-Length: {len(body)}")
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk or len(buffer) > _MAX_HEAD:
                    raise UpstreamError("the API server closed the upgrade before answering")
                buffer += chunk
        except OSError as err:
            sock.close()
            raise UpstreamError(f"upgrade request: {err}") from err
        except UpstreamError:
            sock.close()
            raise
        head, _, early = buffer.partition(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].split()
        status = int(status_line[1]) if len(status_line) >= 2 and status_line[1].isdigit() else 502
        sock.settimeout(None)
        return sock, head + b"\r\n\r\n", status, early

    def _host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return host if self.port == default else f"{host}:{self.port}"


def shutdown_socket(sock: socket.socket) -> None:
    """Shut a socket down both ways (unblocking its readers); ignore one already closed."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
