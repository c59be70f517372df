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

The server is an `observability.health.EndpointServer`. That plumbing only
routes GET and HEAD, so this module swaps in a request handler that also
accepts POST (and answers other methods with 405) once the server is bound.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal
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

__all__ = [
    "DEFAULT_BIND",
    "CounterOp",
    "GaugeOp",
    "ObserveOp",
    "UserMetricError",
    "UserMetricSpec",
    "UserMetrics",
    "UserMetricsServer",
    "decode_request",
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

MetricKind = Literal["counter", "gauge", "histogram", "summary"]


class UserMetricError(ValueError):
    """A request the API rejects with 400; str(error) is the response body (without newline)."""


@dataclass(frozen=True, slots=True)
class CounterOp:
    increment: bool = False
    add: float = 0.0


@dataclass(frozen=True, slots=True)
class GaugeOp:
    set: float = 0.0
    increment: bool = False
    decrement: bool = False
    add: float = 0.0
    subtract: float = 0.0
    set_to_current_time: bool = False


@dataclass(frozen=True, slots=True)
class ObserveOp:
    observe: float = 0.0


@dataclass(frozen=True, slots=True)
class UserMetricSpec:
    """One decoded request; a section is None when absent or null."""

    name: str = ""
    description: str = ""
    counter: CounterOp | None = None
    gauge: GaugeOp | None = None
    histogram: ObserveOp | None = None
    summary: ObserveOp | None = None


# The Go operator's request struct: JSON key -> type, per object, and the Go
# type names its decoding errors mention.
_SCALARS: Final[Mapping[str, Mapping[str, type[object]]]] = {
    "": {"name": str, "description": str},
    "counter": {"increment": bool, "add": float},
    "gauge": {
        "set": float,
        "increment": bool,
        "decrement": bool,
        "add": float,
        "subtract": float,
        "set_to_current_time": bool,
    },
    "histogram": {"observe": float},
    "summary": {"observe": float},
}
_SECTIONS: Final[Mapping[str, tuple[type[object], str]]] = {
    "counter": (CounterOp, "metrics.UserMetricCounter"),
    "gauge": (GaugeOp, "metrics.UserMetricGauge"),
    "histogram": (ObserveOp, "metrics.UserMetricHistogram"),
    "summary": (ObserveOp, "metrics.UserMetricSummary"),
}
_GO_TYPES: Final[Mapping[type[object], str]] = {bool: "bool", float: "float64", str: "string"}


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_error(value: object, path: str, go_type: str) -> UserMetricError:
    # Worded like Go's json.UnmarshalTypeError, which the Go operator returns verbatim.
    return UserMetricError(
        f"json: cannot unmarshal {_json_type(value)} into Go struct field "
        f"UserMetric.{path} of type {go_type}"
    )


def _scalar(value: object, want: type[object], path: str) -> object:
    go_type = _GO_TYPES[want]
    if want is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(value, path, go_type)
        try:
            number = float(value)
        except OverflowError:  # an integer literal beyond float64
            number = math.inf
        if not math.isfinite(number):
            raise UserMetricError(
                f"json: cannot unmarshal number {value} into Go struct field "
                f"UserMetric.{path} of type float64"
            )
        return number
    if not isinstance(value, want):
        raise _type_error(value, path, go_type)
    return value


def _decode_object(document: Mapping[str, object], section: str) -> dict[str, object]:
    """The fields `document` sets, with JSON keys matched to names the way Go matches tags.

    Go prefers an exact match and falls back to a case-insensitive one; as every
    name here is lower case, matching lower-cased keys gives the same result.
    Unknown keys are ignored and null leaves a field at its zero value.
    """
    names = {name: name for name in _SCALARS[section]}
    if not section:
        names.update({name: name for name in _SECTIONS})
    values: dict[str, object] = {}
    for key, value in document.items():
        name = names.get(key.lower())
        if name is None or value is None:
            continue
        path = f"{section}.{name}" if section else name
        if name in _SECTIONS and not section:
            target, go_type = _SECTIONS[name]
            if not isinstance(value, dict):
                raise _type_error(value, path, go_type)
            values[name] = target(**_decode_object(value, name))
        else:
            values[name] = _scalar(value, _SCALARS[section][name], path)
    return values


def decode_request(body: bytes) -> UserMetricSpec:
    """Read a request body as Go's json.Decoder reads it into the Go operator's struct."""
    text = body.decode("utf-8", errors="replace").lstrip(" \t\r\n")
    if not text:
        raise UserMetricError("EOF")
    try:
        # raw_decode stops after the first value: Go's Decoder ignores what follows too.
        document, _ = json.JSONDecoder(parse_constant=_reject_constant).raw_decode(text)
    except json.JSONDecodeError as err:
        raise UserMetricError(f"invalid JSON: {err}") from None
    if document is None:
        return UserMetricSpec()  # Go decodes null into a struct as a no-op
    if not isinstance(document, dict):
        raise UserMetricError(
            f"json: cannot unmarshal {_json_type(document)} into Go value of type "
            "metrics.UserMetric"
        )
    values = _decode_object(document, "")
    return UserMetricSpec(**values)  # type: ignore[arg-type]  # types checked by _scalar


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN and Infinity; JSON (and Go) do not.
    raise json.JSONDecodeError(f"invalid literal {name}", name, 0)


def _kind_of(spec: UserMetricSpec) -> MetricKind:
    """The single metric section of a request; raises the Go operator's messages otherwise."""
    sections: tuple[tuple[MetricKind, object], ...] = (
        ("counter", spec.counter),
        ("gauge", spec.gauge),
        ("histogram", spec.histogram),
        ("summary", spec.summary),
    )
    given = [kind for kind, section in sections if section is not None]
    if len(given) > 1:
        raise UserMetricError("only one metric can be processed at a time")
    if not given:
        raise UserMetricError("a request should contain at least one metric")
    return given[0]


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
        kind = _kind_of(spec)
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
