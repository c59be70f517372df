"""The user metrics API: custom Prometheus metrics that roles create with `osdk_metric`.

Where this sits: the `run` command starts one `UserMetricsServer` on
127.0.0.1:5050 (the Go operator's fixed address, which the
`operator_sdk.util.osdk_metric` module defaults to) and gives it the registry
of its `OperatorMetrics`, so user metrics are scraped from the operator's
`/metrics` with everything else. Roles POST one JSON request per operation:

    {"name": "...", "description": "...",
     "counter": {"increment": bool, "add": float}
     | "gauge": {"set", "increment", "decrement", "add", "subtract", "set_to_current_time"}
     | "histogram": {"observe": float} | "summary": {"observe": float}}

Behaviour follows ansible-operator-plugins v1.42 (`internal/ansible/apiserver`,
`metrics.HandleUserMetric`): the body is read the way Go's encoding/json reads
it (unknown keys ignored, keys matched case-insensitively, null = absent,
trailing data ignored); exactly one metric section; a metric is created by its
first request and keeps that type (histogram and summary requests are
interchangeable, as there); counters cannot decrease; a gauge applies only
the first set operation in the order increment, decrement, add, subtract,
set, set_to_current_time (so `set: 0` does nothing). Errors are 400 with the
reason as a text body; success is an empty 200.

Where the two differ, and why:
* A counter whose name does not end in `_total` is exposed with
  `# TYPE <name> untyped`: prometheus_client's text format names every
  counter family `<name>_total`, which would no longer match the `<name>`
  sample that the Go operator exposes and dashboards query.
* A name that is not a valid Prometheus name, or that clashes with a metric
  already in the registry, is accepted but not exposed, with a warning in the
  log; the Go operator does the same (minus the warning level), and a role
  that worked there must not start failing here.

Requests are decoded by observability/usermetricsapi.py. The server is an
`observability.health.EndpointServer`. That plumbing only
routes GET and HEAD, so this module swaps in a request handler that also
accepts POST (and answers other methods with 405) once the server is bound.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from ansible_operator.observability.health import (
    EndpointServer,
    Request,
    Response,
    _RequestHandler,
    _Server,
    not_found,
)
from ansible_operator.observability.usermetricsapi import (
    MetricKind,
    UserMetricError,
    UserMetricSpec,
    decode_request,
    kind_of,
)

__all__ = [
    "DEFAULT_BIND",
    "UserMetrics",
    "UserMetricsServer",
]

_log = logging.getLogger(__name__)

DEFAULT_BIND: Final = "127.0.0.1:5050"
PATH: Final = "/metrics"
# Requests are a few hundred bytes; this only stops a runaway client.
MAX_BODY_BYTES: Final = 1 << 20
# client_golang's DefBuckets, which the Go operator's user histograms use.
HISTOGRAM_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Prometheus' classic metric-name syntax; other names are not exposed.
_NAME: Final = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_TEXT: Final = "text/plain; charset=utf-8"


def _go_float(value: float) -> str:
    """A bucket bound as Go's strconv.FormatFloat(v, 'g', -1, 64) prints it: 1, 0.5, +Inf."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)


class _UserMetric:
    """One user metric's state; registered in the registry as its own collector."""

    def __init__(self, name: str, help_text: str, kind: MetricKind, lock: threading.Lock) -> None:
        self.name = name
        self.help = help_text
        self.kind: MetricKind = kind
        self._lock = lock
        self.value = 0.0  # counter, gauge
        self.sum = 0.0  # histogram, summary
        self.count = 0
        self.bucket_counts = [0] * len(HISTOGRAM_BUCKETS)

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for index, bound in enumerate(HISTOGRAM_BUCKETS):
            if value <= bound:
                self.bucket_counts[index] += 1
                break

    def _family(self) -> Metric:
        if self.kind == "counter":
            if self.name.endswith("_total") and len(self.name) > len("_total"):
                return Metric(self.name.removesuffix("_total"), self.help, "counter")
            return Metric(self.name, self.help, "unknown")
        return Metric(self.name, self.help, self.kind)

    def describe(self) -> list[Metric]:
        # Without samples: what CollectorRegistry.register checks names against.
        return [self._family()]

    def collect(self) -> list[Metric]:
        family = self._family()
        with self._lock:
            if self.kind in ("counter", "gauge"):
                family.add_sample(self.name, {}, self.value)
                return [family]
            if self.kind == "histogram":
                cumulative = 0
                for bound, hits in zip(HISTOGRAM_BUCKETS, self.bucket_counts, strict=True):
                    cumulative += hits
                    family.add_sample(f"{self.name}_bucket", {"le": _go_float(bound)}, cumulative)
                family.add_sample(f"{self.name}_bucket", {"le": "+Inf"}, self.count)
            family.add_sample(f"{self.name}_sum", {}, self.sum)
            family.add_sample(f"{self.name}_count", {}, self.count)
        return [family]


class UserMetrics:
    """User metrics kept for one registry, and the API's request handling.

    Thread-safe: the server calls it from one thread per request, and
    Prometheus scrapes collect from others.
    """

    def __init__(
        self, registry: CollectorRegistry, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._lock = threading.Lock()
        self._metrics: dict[str, _UserMetric] = {}

    def __call__(self, request: Request) -> Response:
        """Requests without a body (GET, HEAD, PUT, ...): only POST is allowed."""
        if request.path != PATH:
            return not_found()
        return _text(405, "Method not allowed")

    def post(self, path: str, body: bytes) -> Response:
        if path != PATH:
            return not_found()
        try:
            self.apply(decode_request(body))
        except UserMetricError as err:
            _log.info("User metric request rejected: %s", err)
            return _text(400, str(err))
        return Response(200, b"")

    def apply(self, spec: UserMetricSpec) -> None:
        """Create the metric on first use, then apply the operation; raises UserMetricError."""
        kind = kind_of(spec)
        with self._lock:
            metric = self._metrics.get(spec.name)
            if metric is None:
                metric = self._create(spec.name, spec.description, kind)
            if metric.kind == "counter":
                self._count(metric, spec)
            elif metric.kind == "gauge":
                self._gauge(metric, spec)
            else:
                self._observe(metric, spec)

    def _create(self, name: str, help_text: str, kind: MetricKind) -> _UserMetric:
        metric = _UserMetric(name, help_text, kind, self._lock)
        # Kept even when it cannot be exposed, so the type rules still hold for it.
        self._metrics[name] = metric
        _log.info("Registering user metric", extra={"metric": name, "type": kind})
        if not _NAME.match(name):
            _log.warning(
                "User metric not exposed: not a valid Prometheus metric name",
                extra={"metric": name},
            )
            return metric
        try:
            self._registry.register(metric)
        except ValueError as err:  # prometheus_client's "Duplicated timeseries"
            _log.warning(
                "User metric not exposed: its name is already in use",
                extra={"metric": name, "error": str(err)},
            )
        return metric

    def _count(self, metric: _UserMetric, spec: UserMetricSpec) -> None:
        op = spec.counter
        if op is None:
            raise UserMetricError(f"cannot change metric type of {spec.name}, which is a counter")
        if op.increment:
            metric.value += 1
        elif op.add != 0:
            if op.add < 0:
                raise UserMetricError("counter metrics cannot decrease in value")
            metric.value += op.add

    def _gauge(self, metric: _UserMetric, spec: UserMetricSpec) -> None:
        op = spec.gauge
        if op is None:
            raise UserMetricError(f"cannot change metric type of {spec.name}, which is a gauge")
        if op.increment:
            metric.value += 1
        elif op.decrement:
            metric.value -= 1
        elif op.add != 0:
            metric.value += op.add
        elif op.subtract != 0:
            metric.value -= op.subtract
        elif op.set != 0:
            metric.value = op.set
        elif op.set_to_current_time:
            metric.value = self._clock()

    def _observe(self, metric: _UserMetric, spec: UserMetricSpec) -> None:
        op = spec.histogram if spec.histogram is not None else spec.summary
        if op is None:
            raise UserMetricError(
                f"cannot change metric type of {spec.name}, which is a histogram or summary"
            )
        metric.observe(op.observe)


def _text(status: int, message: str) -> Response:
    # Go's http.Error: the message plus a newline, as plain text, not sniffable.
    return Response(
        status,
        f"{message}\n".encode(),
        content_type=_TEXT,
        headers={"X-Content-Type-Options": "nosniff"},
    )


class _PostRequestHandler(_RequestHandler):
    """The shared endpoint handler plus POST, for servers whose handler is a `UserMetrics`."""

    def do_POST(self) -> None:
        assert isinstance(self.server, _Server)
        metrics = self.server.handler
        body = self._read_body()
        if body is None:
            response = _text(413, "request body too large")
        elif isinstance(metrics, UserMetrics):
            response = metrics.post(urlsplit(self.path).path, body)
        else:
            response = _text(405, "Method not allowed")
        self._send(response)

    def _other_method(self) -> None:
        # A body we do not read would be parsed as the next request: close instead.
        self.close_connection = True
        self._respond(send_body=True)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other_method

    def _read_body(self) -> bytes | None:
        """The request body by Content-Length; None (connection closed) when too large."""
        if self.headers.get("Transfer-Encoding"):
            # Not supported (clients send Content-Length); the body reads as empty,
            # which the API rejects, and the connection cannot be reused.
            self.close_connection = True
            return b""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Length", str(len(response.body)))
        if response.body:
            self.send_header("Content-Type", response.content_type)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)


class UserMetricsServer(EndpointServer):
    """`POST /metrics` on `bind` (default 127.0.0.1:5050), feeding user metrics into `registry`.

    `flag` names the setting in bind errors; the Go operator has no flag for
    this address, so the default just describes it.
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        bind: str = DEFAULT_BIND,
        flag: str = "user metrics API address",
    ) -> None:
        self.metrics = UserMetrics(registry)
        super().__init__(bind=bind, what="user metrics API", flag=flag, handler=self.metrics)

    def start(self) -> None:
        super().start()
        server = self._server
        if server is not None:
            # Requests arriving in the instant between binding and this line
            # get 501 for POST; the operator starts this before any Ansible run.
            server.RequestHandlerClass = _PostRequestHandler
