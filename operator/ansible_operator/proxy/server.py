"""The API proxy: the only Kubernetes endpoint an Ansible run talks to.

Where it sits in the flow::

    Ansible run (kubernetes.core, kubeconfig from proxy.credentials)
        --HTTP, Bearer <run token>-->  ApiProxy (this module, loopback only)
        --HTTPS, operator identity-->  API server          (kube.upstream)
    ApiProxy --on_touch(Owner, Touch)--> controller.dependents.DependentWatches

The controller creates one ApiProxy at start-up, issues a run token per run
(`RunCredentials.issue`) and points the run at `ApiProxy.url`. Each request:

1. must carry a live run token, else 401; the token names the owner CR;
2. is forwarded faithfully: method, path, query, body, end-to-end headers
   (Content-Type, Accept incl. protobuf and Table variants), status, and the
   response body streamed chunk by chunk (watches, `follow=true` logs);
   `Connection: Upgrade` requests (exec, attach, port-forward) are relayed
   byte for byte both ways after the API server's 101;
3. if it writes an object (not a subresource) and `inject_owner_ref` is on,
   an object the write *creates* is made owned by the CR (rules in
   `proxy.ownership`): a POST body gets the ownership injected; a PUT or
   server-side apply body only when the object is missing (read just before)
   or already records this CR, and a follow-up JSON patch adds it if such a
   write answers 201 without it; merge, strategic-merge and JSON patches and
   every write of a finalizer run are forwarded untouched. Every successful
   write is reported to `on_touch` so the kind gets watched.

A run whose token is read-only (`ansible-operator plan`) has
every write sent as a server-side dry run and each answer handed to
`on_dry_run`; exec, attach, port-forward and proxy requests are refused
(`proxy.readonly`).

Reads are never cached: every GET, LIST and WATCH goes to the API server.
The Go proxy answered reads from informers it created on first use: reads
right after a write could be stale, tools hung on "cache misses", and one
informer per kind ever read stayed in memory for the life of the process
(docs/proxy.md). A live read costs one round trip on loopback-adjacent
traffic, and a role that reads is about to run Ansible tasks costing far
more than that.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

import urllib3

from ansible_operator.errors import ConfigError, OperatorError
from ansible_operator.kube import deepjson
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.kube.login import Login
from ansible_operator.kube.upstream import Upstream, UpstreamError, shutdown_socket
from ansible_operator.observability.eventrecorder import EventRecorder
from ansible_operator.observability.serving import Serving
from ansible_operator.proxy.credentials import Owner, RunCredentials
from ansible_operator.proxy.discovery import resource_of
from ansible_operator.proxy.handler import ProxyHandler
from ansible_operator.proxy.ownership import (
    JSON_PATCH,
    Mode,
    RequestInfo,
    Touch,
    WriteKind,
    decide,
    decode_body,
    dependent_namespace,
    followup_patch,
    has_ownership,
    with_ownership,
    write_kind,
)
from ansible_operator.proxy.readonly import DryRunWrite
from ansible_operator.proxy.screen import RequestScreen

log = logging.getLogger("ansible_operator.proxy")

OnTouch = Callable[[Owner, Touch], None]
OnDryRun = Callable[[Owner, DryRunWrite], None]


@dataclass(frozen=True, slots=True)
class WritePlan:
    """How one write request gets its ownership."""

    kind: WriteKind
    mode: Mode
    resource: ResourceInfo
    touch: Touch
    injected: bool  # the body sent upstream records the owner

    @property
    def needs_follow_up(self) -> bool:
        """An upsert sent without ownership: if it creates, ownership is added after."""
        return self.kind is WriteKind.UPSERT and not self.injected


def _parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    try:
        if not sep or not port.isdigit():
            raise ValueError(bind)
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError as err:
        raise ConfigError(f"API proxy bind address {bind!r}: expected HOST:PORT") from err
    if not loopback:
        # Runs authenticate with a bearer token over plain HTTP: only safe
        # where no one can sniff the traffic.
        raise ConfigError(f"API proxy bind address {bind!r}: only loopback addresses are allowed")
    return host, int(port)


def _is_owner(owner: Owner, resource: ResourceInfo, *, namespace: str, name: str) -> bool:
    return (
        (resource.group, resource.kind) == (owner.group, owner.kind)
        and name == owner.name
        and namespace == owner.namespace
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default backlog of 5 resets connections when many runs
    # (or one run's parallel requests) connect at the same moment.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], proxy: ApiProxy) -> None:
        self.proxy = proxy
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, ProxyHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops its connection is routine (runs end, watches are
        # abandoned); the stdlib default prints a traceback to stderr.
        log.debug("API proxy connection from %s ended", client_address, exc_info=True)


class ApiProxy:
    """The run-facing API endpoint; see the module docstring."""

    def __init__(
        self,
        *,
        upstream: Login,
        credentials: RunCredentials,
        kube: Kube,
        inject_owner_ref: bool,
        on_touch: OnTouch | None = None,
        on_dry_run: OnDryRun | None = None,
        bind: str = "127.0.0.1:0",
        quiet: bool = False,
        compat_restores: bool = False,
        events: EventRecorder | None = None,
    ) -> None:
        """`quiet`: a short-lived proxy of one plan (a drift check plans every period)
        logs its start at debug level only, and no warning about `inject_owner_ref`
        (the operator's own proxy gives that once)."""
        self._address = _parse_bind(bind)
        self._quiet = quiet
        self.credentials = credentials
        self.kube = kube
        self.inject_owner_ref = inject_owner_ref
        self.on_touch = on_touch
        # Told every write (and refusal) of a read-only run: what a plan records.
        self.on_dry_run = on_dry_run
        # Called by the handler before ownership: proxy.screen's rules (its own CR is
        # never re-created; with `compat_restores`, numbers in string fields go as text).
        self.screen = RequestScreen(kube, restores=compat_restores, events=events)
        self.upstream = Upstream(upstream)
        self._server: _Server | None = None
        self._serving: Serving | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Open client sockets and upstream streams, closed by stop() so that
        # watches and exec sessions in flight end with the proxy.
        self._sockets: set[socket.socket] = set()
        self._streams: set[urllib3.BaseHTTPResponse] = set()

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Listen and serve in a daemon thread; returns once the port is bound.

        Raises ConfigError naming the address when the port cannot be bound.
        """
        if self._server is not None:
            return
        try:
            server = _Server(self._address, self)
        except OSError as err:
            # Most often another operator on this machine holds the port.
            host, port = self._address
            raise ConfigError(
                f"API proxy: cannot listen on {host}:{port} (--proxy-port): {err.strerror or err}"
            ) from err
        self._server = server
        self._serving = Serving(server)
        self._thread = threading.Thread(target=self._serving.run, name="api-proxy", daemon=True)
        self._thread.start()
        if not self.inject_owner_ref and not self._quiet:
            log.warning(
                "Warning: injection of owner references and dependent watches is turned off"
            )
        log.log(
            logging.DEBUG if self._quiet else logging.INFO, "API proxy listening on %s", self.url
        )

    def stop(self) -> None:
        """Stop listening and end every connection and stream in flight."""
        server, self._server = self._server, None
        serving, self._serving = self._serving, None
        if server is None:
            return
        if serving is not None:
            serving.stop()
        server.server_close()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
            streams, self._streams = list(self._streams), set()
        for stream in streams:
            stream.shutdown()
        for sock in sockets:
            shutdown_socket(sock)
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the API proxy is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._address[0]
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def track(self, item: socket.socket | urllib3.BaseHTTPResponse, *, on: bool) -> None:
        with self._lock:
            bucket: set[Any] = self._sockets if isinstance(item, socket.socket) else self._streams
            if on:
                bucket.add(item)
            else:
                bucket.discard(item)

    # -- ownership (called from handler threads) -----------------------------

    def plan(
        self, owner: Owner, method: str, info: RequestInfo, content_type: str, body: bytes
    ) -> tuple[WritePlan | None, bytes]:
        """Decide the write's ownership; return the plan and the body to send upstream."""
        kind = write_kind(method, info, content_type) if self.inject_owner_ref else WriteKind.NONE
        if kind is WriteKind.NONE:
            return None, body
        resource = resource_of(self.kube, info)
        if resource is None:
            return None, body
        obj = decode_body(body, content_type) if kind is not WriteKind.PATCH else None
        if kind is not WriteKind.PATCH and obj is None:
            log.info("Cannot read the body of %s %s; forwarding without ownership", method, info)
            return None, body
        namespace = dependent_namespace(info, obj, namespaced=resource.namespaced)
        mode = decide(
            owner, dependent_namespaced=resource.namespaced, dependent_namespace=namespace
        )
        meta = (obj or {}).get("metadata")
        name = info.name or (str(meta.get("name") or "") if isinstance(meta, dict) else "")
        if _is_owner(owner, resource, namespace=namespace, name=name):
            # A role updating its own CR: it must not come to own itself.
            return None, body
        touch = Touch(
            group=resource.group,
            version=resource.version,
            kind=resource.kind,
            plural=resource.plural,
            namespace=namespace,
            name=name,
            cluster_scoped=not resource.namespaced,
            by_owner_reference=mode is Mode.OWNER_REFERENCE,
        )
        inject = obj is not None and self._injects(
            owner, kind, resource=resource, touch=touch, mode=mode
        )
        if inject and obj is not None:
            try:
                body = deepjson.dumps(with_ownership(obj, owner, mode)).encode()
            except (TypeError, ValueError):
                # YAML that JSON cannot carry (timestamps...): leave it alone.
                return None, body
            log.debug("Injecting %s of %s into %s %s", mode.value, owner.name, method, info)
        plan = WritePlan(kind=kind, mode=mode, resource=resource, touch=touch, injected=inject)
        return plan, body

    def _injects(
        self, owner: Owner, kind: WriteKind, *, resource: ResourceInfo, touch: Touch, mode: Mode
    ) -> bool:
        """Whether this write's body gets the ownership (rule in proxy.ownership)."""
        if owner.finalizing:
            return False
        if kind is WriteKind.CREATE:
            return True
        # An upsert: look at the object as it is now. Missing: this write
        # creates it. Present: keep an ownership it records already, never add one.
        try:
            live = self.kube.get_or_none(resource, namespace=touch.namespace, name=touch.name)
        except OperatorError as err:
            # Unknown: adding an owner to an object that may exist could have it
            # deleted with the CR; if the write creates it after all, the
            # follow-up after its 201 adds the ownership.
            log.warning("Could not read %s/%s before a write: %s", touch.plural, touch.name, err)
            return False
        return live is None or has_ownership(live, owner, mode)

    def follow_up(
        self,
        owner: Owner,
        *,
        info: RequestInfo,
        plan: WritePlan,
        headers: dict[str, str],
        query: str,
        response: urllib3.BaseHTTPResponse,
    ) -> urllib3.BaseHTTPResponse:
        """After an upsert that created its object without ownership: add it.

        That happens when the object was deleted between `plan`'s read and the
        write. Returns the response to relay: the follow-up's when it succeeded.
        """
        if response.status != 201 or owner.finalizing:
            return response
        try:
            obj = deepjson.loads(response.data)
        except ValueError:
            log.info("Response of %s is not JSON; ownership not checked", info)
            return response
        ops = followup_patch(obj, owner, plan.mode) if isinstance(obj, dict) else None
        if ops is None:
            return response
        kept = [(k, v) for k, v in urllib.parse.parse_qsl(query) if k == "fieldManager"]
        target = plan.resource.path(namespace=plan.touch.namespace, name=plan.touch.name)
        if kept:
            target += "?" + urllib.parse.urlencode(kept)
        sent = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        sent["Content-Type"] = JSON_PATCH
        try:
            second = self.upstream.request(
                "PATCH", target, headers=sent, body=json.dumps(ops).encode(), preload=True
            )
        except UpstreamError as err:
            log.warning("Could not add the owner of %s after it was created: %s", info, err)
            return response
        if 200 <= second.status < 300:
            log.debug("Added %s of %s after creating %s", plan.mode.value, owner.name, info)
            return second
        # Most likely the object changed in between (the resourceVersion test
        # failed): the run's own write stands.
        log.warning(
            "Could not add the owner of %s after it was created: HTTP %s %s",
            info,
            second.status,
            second.data[:300].decode(errors="replace"),
        )
        return response

    def dry_run_done(self, owner: Owner, write: DryRunWrite) -> None:
        if self.on_dry_run is None:
            return
        try:
            self.on_dry_run(owner, write)
        except Exception:
            # Recording is the plan's business; the run's request goes on.
            log.exception("Recording the dry run %s %s failed", write.method, write.info)

    def touched(self, owner: Owner, plan: WritePlan) -> None:
        if self.on_touch is None:
            return
        try:
            self.on_touch(owner, plan.touch)
        except Exception:
            # Watching is a side effect; the run's write has succeeded.
            log.exception("Dependent watch for %s failed", plan.touch)
