"""Unit tests of observability.usermetrics: the user metrics API over real HTTP on 127.0.0.1.

Every answer is checked as a client sees it (status, body, headers) and every
effect through the registry's text exposition, the way Prometheus reads it.
One server serves the module; each test works on metric names of its own.
"""

from __future__ import annotations

import http.client
import inspect
import json
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ansible_operator.observability.health import BindError
from ansible_operator.observability.metrics import OperatorMetrics
from ansible_operator.observability.usermetrics import (
    DEFAULT_BIND,
    MAX_BODY_BYTES,
    UserMetrics,
    UserMetricsServer,
)
from ansible_operator.observability.usermetricsapi import (
    UserMetricError,
    UserMetricSpec,
    decode_request,
)


@pytest.fixture(scope="module")
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture(scope="module")
def server(registry: CollectorRegistry) -> Iterator[UserMetricsServer]:
    # One server for the module: stopping one waits for its poll interval.
    started = UserMetricsServer(registry=registry, bind="127.0.0.1:0")
    started.start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def name() -> str:
    """A metric name no other test uses."""
    return f"m{uuid.uuid4().hex[:10]}"


class Client:
    def __init__(self, port: int) -> None:
        self.port = port

    def request(
        self, method: str, path: str = "/metrics", body: bytes | None = None
    ) -> tuple[int, str, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response.status, text, response

    def post(self, document: Any) -> tuple[int, str]:
        status, text, _ = self.request("POST", body=json.dumps(document).encode())
        return status, text


@pytest.fixture(scope="module")
def api(server: UserMetricsServer) -> Client:
    assert server.port
    return Client(server.port)


def samples(registry: CollectorRegistry, prefix: str) -> dict[str, float]:
    """The samples (`name{label=value}`: value) whose names start with prefix."""
    text = generate_latest(registry).decode()
    return {
        sample.name + "".join(f"{{{k}={v}}}" for k, v in sorted(sample.labels.items())): (
            sample.value
        )
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith(prefix)
    }


# --- HTTP surface --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_post_is_allowed(api: Client, method: str) -> None:
    body = b"{}" if method in {"PUT", "PATCH"} else None
    status, text, response = api.request(method, body=body)

    assert status == 405
    assert text == ("" if method == "HEAD" else "Method not allowed\n")
    assert response.getheader("Content-Type") == "text/plain; charset=utf-8"


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", ["/", "/metrics/", "/metric", "/healthz"])
def test_other_paths_are_not_found(
    api: Client, registry: CollectorRegistry, name: str, method: str, path: str
) -> None:
    body = json.dumps({"name": name, "counter": {}}).encode() if method == "POST" else None
    status, text, _ = api.request(method, path, body=body)

    assert (status, text) == (404, "404 page not found\n")
    assert samples(registry, name) == {}


def test_success_is_an_empty_200(api: Client, registry: CollectorRegistry, name: str) -> None:
    body = json.dumps({"name": name, "description": "d", "gauge": {"set": 4}}).encode()
    status, text, response = api.request("POST", "/metrics?ignored=1", body=body)

    assert (status, text) == (200, "")
    assert response.getheader("Content-Length") == "0"
    assert samples(registry, name) == {name: 4.0}


def test_errors_are_400_plain_text(api: Client) -> None:
    status, text, response = api.request("POST", body=b"{}")

    assert (status, text) == (400, "a request should contain at least one metric\n")
    assert response.getheader("Content-Type") == "text/plain; charset=utf-8"
    assert response.getheader("X-Content-Type-Options") == "nosniff"


def test_keep_alive_connection_serves_several_posts(
    api: Client, registry: CollectorRegistry, name: str
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    body = json.dumps({"name": name, "description": "d", "counter": {"increment": True}})
    for _ in range(3):
        conn.request("POST", "/metrics", body=body)
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"")
    conn.close()

    assert samples(registry, name) == {name: 3.0}


def test_oversized_body_is_refused_unread(api: Client) -> None:
    with socket.create_connection(("127.0.0.1", api.port), timeout=10) as conn:
        conn.sendall(
            b"POST /metrics HTTP/1.1\r\nHost: x\r\n"
            + f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
        )
        reply = conn.makefile("rb").read()

    assert reply.startswith(b"HTTP/1.1 413 ")
    assert reply.endswith(b"\r\n\r\nrequest body too large\n")


def test_bind_error_names_the_setting(server: UserMetricsServer) -> None:
    clash = UserMetricsServer(registry=CollectorRegistry(), bind=f"127.0.0.1:{server.port}")

    with pytest.raises(BindError, match=r"^user metrics API: cannot listen on user metrics API"):
        clash.start()


def test_default_address_is_the_go_operators() -> None:
    default = inspect.signature(UserMetricsServer).parameters["bind"].default

    assert default == DEFAULT_BIND == "127.0.0.1:5050"  # loopback only, as in Go


# --- request decoding (Go encoding/json semantics) -------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "EOF"),
        (b"  \n", "EOF"),
        (b"[1]", "json: cannot unmarshal array into Go value of type metrics.UserMetric"),
        (b'"x"', "json: cannot unmarshal string into Go value of type metrics.UserMetric"),
        (
            b'{"name": 5, "counter": {}}',
            "json: cannot unmarshal number into Go struct field UserMetric.name of type string",
        ),
        (
            b'{"name": "a", "counter": []}',
            "json: cannot unmarshal array into Go struct field UserMetric.counter "
            "of type metrics.UserMetricCounter",
        ),
        (
            b'{"name": "a", "counter": {"increment": "yes"}}',
            "json: cannot unmarshal string into Go struct field UserMetric.counter.increment "
            "of type bool",
        ),
        (
            b'{"name": "a", "gauge": {"set": true}}',
            "json: cannot unmarshal bool into Go struct field UserMetric.gauge.set of type float64",
        ),
        (
            b'{"name": "a", "gauge": {"set": 1e400}}',
            "json: cannot unmarshal number inf into Go struct field UserMetric.gauge.set "
            "of type float64",
        ),
    ],
)
def test_undecodable_bodies_are_400(api: Client, body: bytes, message: str) -> None:
    status, text, _ = api.request("POST", body=body)

    assert (status, text) == (400, message + "\n")


@pytest.mark.parametrize("template", ["{bad", '{"name": "NAME", "counter": {}', '{"name": NaN}'])
def test_syntax_errors_are_400(
    api: Client, registry: CollectorRegistry, name: str, template: str
) -> None:
    status, text, _ = api.request("POST", body=template.replace("NAME", name).encode())

    assert status == 400
    assert text.startswith("invalid JSON: ")
    assert samples(registry, name) == {}


def test_decoding_follows_go() -> None:
    # Keys match case-insensitively, unknown keys are ignored, null is absent,
    # and whatever follows the first JSON value is ignored.
    spec = decode_request(
        b'{"NAME": "a", "Description": "d", "extra": 1, "gauge": null,'
        b' "Counter": {"INCREMENT": true, "add": null}} trailing'
    )

    assert spec.name == "a"
    assert spec.description == "d"
    assert spec.gauge is None
    assert spec.counter is not None
    assert (spec.counter.increment, spec.counter.add) == (True, 0.0)
    assert decode_request(b"null") == UserMetricSpec()


# --- metric rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sections",
    [
        {"counter": {}, "gauge": {}},
        {"histogram": {}, "summary": {}},
        {"counter": {}, "gauge": {}, "histogram": {}, "summary": {}},
    ],
)
def test_only_one_metric_per_request(
    api: Client, registry: CollectorRegistry, name: str, sections: dict[str, Any]
) -> None:
    assert api.post({"name": name, **sections}) == (
        400,
        "only one metric can be processed at a time\n",
    )
    assert samples(registry, name) == {}


@pytest.mark.parametrize("extra", [{"description": "d"}, {"counter": None}, {"Counters": {}}])
def test_at_least_one_metric_per_request(
    api: Client, registry: CollectorRegistry, name: str, extra: dict[str, Any]
) -> None:
    assert api.post({"name": name, **extra}) == (
        400,
        "a request should contain at least one metric\n",
    )
    assert samples(registry, name) == {}


@pytest.mark.parametrize(
    ("created", "then", "kind"),
    [
        ({"counter": {}}, {"gauge": {"set": 1}}, "a counter"),
        ({"counter": {}}, {"histogram": {"observe": 1}}, "a counter"),
        ({"gauge": {}}, {"counter": {"increment": True}}, "a gauge"),
        ({"gauge": {}}, {"summary": {"observe": 1}}, "a gauge"),
        ({"histogram": {}}, {"counter": {}}, "a histogram or summary"),
        ({"summary": {}}, {"gauge": {}}, "a histogram or summary"),
    ],
)
def test_a_metric_keeps_its_type(
    api: Client, name: str, created: dict[str, Any], then: dict[str, Any], kind: str
) -> None:
    assert api.post({"name": name, "description": "d", **created}) == (200, "")

    assert api.post({"name": name, "description": "d", **then}) == (
        400,
        f"cannot change metric type of {name}, which is {kind}\n",
    )


def test_histogram_and_summary_requests_are_interchangeable(
    api: Client, registry: CollectorRegistry, name: str
) -> None:
    histogram, summary = f"{name}_h", f"{name}_s"
    assert api.post({"name": histogram, "histogram": {"observe": 1}})[0] == 200
    assert api.post({"name": histogram, "summary": {"observe": 2}})[0] == 200
    assert api.post({"name": summary, "summary": {"observe": 3}})[0] == 200
    assert api.post({"name": summary, "histogram": {"observe": 4}})[0] == 200

    values = samples(registry, name)
    assert (values[f"{histogram}_sum"], values[f"{histogram}_count"]) == (3, 2)
    assert (values[f"{summary}_sum"], values[f"{summary}_count"]) == (7, 2)


def test_counters_cannot_decrease(api: Client, registry: CollectorRegistry, name: str) -> None:
    assert api.post({"name": name, "counter": {"add": -1}}) == (
        400,
        "counter metrics cannot decrease in value\n",
    )
    # As in the Go operator, the request registered the counter before failing.
    assert samples(registry, name) == {name: 0.0}
    assert api.post({"name": name, "counter": {"add": 2.5}})[0] == 200
    # increment wins over add
    assert api.post({"name": name, "counter": {"increment": True, "add": 5}})[0] == 200
    assert samples(registry, name) == {name: 3.5}


@pytest.mark.parametrize(
    ("operation", "expected"),
    [
        ({}, 10),
        ({"increment": True, "decrement": True, "add": 5, "set": 1}, 11),
        ({"decrement": True, "add": 5, "set": 1}, 9),
        ({"add": 5, "subtract": 3, "set": 1}, 15),
        ({"add": 0, "subtract": 3, "set": 1}, 7),
        ({"set": 1, "set_to_current_time": True}, 1),
        ({"set": 0}, 10),  # a zero set is no operation at all
        ({"set": 0, "set_to_current_time": True}, 1234.5),
        ({"increment": False, "decrement": False, "add": 0, "subtract": 0}, 10),
    ],
)
def test_gauge_applies_the_first_operation_given(
    operation: dict[str, Any], expected: float
) -> None:
    registry = CollectorRegistry()
    metrics = UserMetrics(registry, clock=lambda: 1234.5)
    metrics.apply(decode_request(b'{"name": "g", "gauge": {"set": 10}}'))

    metrics.apply(decode_request(json.dumps({"name": "g", "gauge": operation}).encode()))

    assert samples(registry, "g") == {"g": expected}


def test_exposition_matches_the_go_operator(
    api: Client, registry: CollectorRegistry, name: str
) -> None:
    for document in (
        {"name": f"{name}_plain", "description": "a counter", "counter": {"add": 2}},
        {"name": f"{name}_total", "description": "_total counter", "counter": {"increment": True}},
        {"name": f"{name}_level", "description": "a gauge", "gauge": {"subtract": 7}},
        {"name": f"{name}_lat", "description": "a histogram", "histogram": {"observe": 0.3}},
        {
            "name": f"{name}_lat",
            "description": "later help is ignored",
            "histogram": {"observe": 20},
        },
        {"name": f"{name}_sizes", "description": "a summary", "summary": {"observe": 2}},
    ):
        assert api.post(document) == (200, "")

    text = generate_latest(registry).decode()
    assert f"# HELP {name}_plain a counter\n# TYPE {name}_plain untyped\n{name}_plain 2.0\n" in text
    assert f"# TYPE {name}_total counter\n{name}_total 1.0\n" in text
    assert f"# TYPE {name}_level gauge\n{name}_level -7.0\n" in text
    assert f"# HELP {name}_lat a histogram\n# TYPE {name}_lat histogram\n" in text
    assert f"# TYPE {name}_sizes summary\n{name}_sizes_sum 2.0\n{name}_sizes_count 1.0\n" in text
    values = samples(registry, f"{name}_lat")
    # client_golang's default buckets, labelled as Go prints them
    bounds = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"]
    assert [values[f"{name}_lat_bucket{{le={b}}}"] for b in bounds] == [0] * 6 + [1] * 5
    assert values[f"{name}_lat_bucket{{le=+Inf}}"] == 2
    assert (values[f"{name}_lat_sum"], values[f"{name}_lat_count"]) == (20.3, 2)


def test_user_metrics_appear_in_the_operator_metrics() -> None:
    operator = OperatorMetrics(runtime_collectors=False)
    with UserMetricsServer(registry=operator.registry, bind="127.0.0.1:0") as server:
        assert server.port
        assert Client(server.port).post(
            {"name": "backups_total", "description": "d", "counter": {"increment": True}}
        ) == (200, "")

    text = operator.render().decode()
    assert "backups_total 1.0\n" in text
    assert "ansible_operator_build_info" in text


def test_unexposable_names_are_accepted_with_a_warning(
    api: Client, registry: CollectorRegistry, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    Counter(name, "an operator metric", registry=registry)
    caplog.set_level(logging.WARNING, logger="ansible_operator.observability.usermetrics")
    bad = f"{name}-bad"

    # The Go operator answers 200 and only logs that registration failed.
    assert api.post({"name": bad, "gauge": {"set": 1}}) == (200, "")
    assert api.post({"name": f"{name}_total", "gauge": {"set": 1}}) == (200, "")

    values = samples(registry, name)  # only the operator's counter, untouched
    assert set(values) == {f"{name}_total", f"{name}_created"}
    assert values[f"{name}_total"] == 0
    assert [r.getMessage() for r in caplog.records] == [
        "User metric not exposed: not a valid Prometheus metric name",
        "User metric not exposed: its name is already in use",
    ]
    # The type rules still hold for a metric that is not exposed.
    assert api.post({"name": bad, "counter": {}}) == (
        400,
        f"cannot change metric type of {bad}, which is a gauge\n",
    )


def test_an_empty_name_is_accepted_but_not_exposed(registry: CollectorRegistry) -> None:
    metrics = UserMetrics(registry)
    before = generate_latest(registry)

    metrics.apply(UserMetricSpec(name="", gauge=decode_request(b'{"gauge": {}}').gauge))

    assert generate_latest(registry) == before


def test_concurrent_requests_lose_no_updates(
    api: Client, registry: CollectorRegistry, name: str
) -> None:
    def bump() -> None:
        for _ in range(20):
            assert api.post({"name": name, "counter": {"increment": True}})[0] == 200

    # 4 clients: socketserver's listen backlog of 5 would stall a 6th connect for 1 s.
    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert samples(registry, name) == {name: 80.0}


def test_apply_raises_user_metric_error() -> None:
    with pytest.raises(UserMetricError, match=r"^a request should contain at least one metric$"):
        UserMetrics(CollectorRegistry()).apply(UserMetricSpec(name="x"))
