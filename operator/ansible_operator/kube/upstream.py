"""The API proxy's side towards the real API server: requests with the operator's identity.

Where it sits: in the kube layer, because it is the operator's own login to
the API server, the same `Login` (kube/login.py) as its `Kube`; only the API
proxy uses it (proxy.server builds one `Upstream`, proxy.handler sends each
forwarded request through it). Every request a run sends is re-sent from here
with the operator's credentials (client certificate and key, CA, bearer token,
basic auth), never the run's. Plain requests go through one pooled urllib3
PoolManager built by `make_pool` exactly as the kubernetes client builds its own
(same TLS settings, same HTTP proxy settings, the environment's included;
`Kube` uses it too); connection
upgrades (exec, attach, port-forward) get a raw TLS socket of their own, since
after the 101 the connection is no longer HTTP.

The Authorization header is asked of the login per request: in-cluster service
account tokens rotate, and a token read once at start-up would expire.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

import urllib3

from ansible_operator.kube.login import Login

__all__ = [
    "CONNECT_TIMEOUT",
    "REQUEST_READ_TIMEOUT",
    "Upstream",
    "UpstreamError",
    "make_pool",
    "shutdown_socket",
]

_MAX_HEAD = 64 * 1024
# Reads of ordinary requests: generous (large lists, slow admission webhooks)
# but finite, so a hung API server cannot pin a proxy thread for ever.
REQUEST_READ_TIMEOUT = 300.0
CONNECT_TIMEOUT = 15.0


class UpstreamError(Exception):
    """The API server could not be reached or spoke something other than HTTP."""


def make_pool(login: Login) -> urllib3.PoolManager:
    """A connection pool to `login`'s server, set up as the kubernetes client's
    RESTClientObject sets up its own (TLS, proxy, one pool of cpu_count * 5)."""
    pool_args: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if login.verify_ssl else ssl.CERT_NONE,
        "ca_certs": login.ssl_ca_cert,
        "cert_file": login.cert_file,
        "key_file": login.key_file,
        "maxsize": (os.cpu_count() or 1) * 5,
    }
    if login.tls_server_name:
        pool_args["server_hostname"] = login.tls_server_name
    proxy = proxy_for(login.host, login.proxy)
    if not proxy:
        return urllib3.PoolManager(**pool_args)
    if proxy.split("://", 1)[0].lower() in {"socks5", "socks5h", "socks4", "socks4a"}:
        from urllib3.contrib.socks import SOCKSProxyManager  # noqa: PLC0415 - rarely used

        return SOCKSProxyManager(proxy, **pool_args)
    return urllib3.ProxyManager(proxy, **pool_args)


def proxy_for(server: str, configured: str | None) -> str | None:
    """The proxy to reach `server` through: the kubeconfig's `proxy-url`, else the
    environment's (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY by the server's scheme), and
    none when NO_PROXY names the server, as the kubernetes client (and client-go)
    decide; an operator deployed behind a proxy sets these, with NO_PROXY holding
    the cluster's service range."""
    proxies = urllib.request.getproxies_environment()
    parts = urllib.parse.urlsplit(server)
    if _bypassed(parts.hostname or "", parts.netloc.lower(), proxies.get("no", "")):
        return None
    return configured or proxies.get(parts.scheme) or proxies.get("all") or None


def _bypassed(host: str, host_and_port: str, no_proxy: str) -> bool:
    """Whether a NO_PROXY entry (`*`, a CIDR or address, a domain, host:port) names `host`."""
    if not host:
        return True
    host = host.lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if entry == "*":
            return True
        if not entry:
            continue
        if address is not None:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
        domain = entry.lstrip(".")
        if domain in (host_and_port, host) or host.endswith("." + domain):
            return True
    return False


class Upstream:
    """Requests to the API server with the operator's credentials."""

    def __init__(self, login: Login) -> None:
        self.login = login
        self.base = login.host.rstrip("/")
        parts = urllib.parse.urlsplit(self.base)
        self.scheme = parts.scheme or "https"
        self.hostname = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        self.path_prefix = parts.path.rstrip("/")  # e.g. Rancher's /k8s/clusters/<id>
        self.pool = make_pool(login)

    def auth_headers(self) -> dict[str, str]:
        """The operator's Authorization header, as the login gives it now."""
        header = self.login.authorization()
        return {"Authorization": header} if header else {}  # none: client certificate only

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
        login = self.login
        if login.verify_ssl:
            context = ssl.create_default_context(cafile=login.ssl_ca_cert or None)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if login.cert_file:
            context.load_cert_chain(login.cert_file, login.key_file or None)
        return context

    def connect_raw(self) -> socket.socket:
        """A fresh connection (TLS if https) for an upgrade; the caller closes it."""
        try:
            sock = socket.create_connection((self.hostname, self.port), timeout=CONNECT_TIMEOUT)
        except OSError as err:
            raise UpstreamError(f"connect {self.hostname}:{self.port}: {err}") from err
        if self.scheme != "https":
            return sock
        server_name = self.login.tls_server_name or self.hostname
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
