"""Unit tests of observability.metrics: names, labels and values as Prometheus parses them,
and the /metrics server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import gzip
import http.client
import socket
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from ansible_operator.controller.queueobserver import QueueObserver
from ansible_operator.observability.health import BindError, parse_bind_address
from ansible_operator.observability.metrics import MetricsServer, OperatorMetrics, format_gvk

GVK = format_gvk(group="cache.example.com", version="v1alpha1", kind="Memcached")
CTRL = "memcached-v1alpha1-controller"


def samples(metrics: OperatorMetrics) -> list[Sample]:
    text = metrics.render().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(metrics: OperatorMetrics, metric: str, /, **labels: str) -> float | None:
    found = [s.value for s in samples(metrics) if s.name == metric and s.labels == labels]
    assert len(found) <= 1, found
    return found[0] if found else None


def types(metrics: OperatorMetrics) -> dict[str, str]:
    text = metrics.render().decode()
    return {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")
    }


@pytest.fixture
def metrics() -> OperatorMetrics:
    return OperatorMetrics()


def test_gvk_label_is_gos_groupversionkind_string() -> None:
    assert GVK == "cache.example.com/v1alpha1, Kind=Memcached"
    assert format_gvk(group="", version="v1", kind="Pod") == "/v1, Kind=Pod"


def test_metric_names_and_types_match_the_reference(metrics: OperatorMetrics) -> None:
    expected = {
        "ansible_operator_build_info": "gauge",
        "ansible_operator_reconcile_result": "gauge",  # a gauge used as a counter, kept
        "ansible_operator_reconciles": "histogram",
        "resource_created_at_seconds": "gauge",
        "controller_runtime_reconcile_total": "counter",
        "controller_runtime_reconcile_errors_total": "counter",
        "controller_runtime_reconcile_time_seconds": "histogram",
        "controller_runtime_max_concurrent_reconciles": "gauge",
        "controller_runtime_active_workers": "gauge",
        "workqueue_depth": "gauge",
        "workqueue_adds_total": "counter",
        "workqueue_queue_duration_seconds": "histogram",
        "workqueue_work_duration_seconds": "histogram",
        "workqueue_retries_total": "counter",
        "leader_election_master_status": "gauge",
        "ansible_operator_run_duration_seconds": "histogram",
        "ansible_operator_run_failures_total": "counter",
        "process_resident_memory_bytes": "gauge",
    }
    assert {name: types(metrics).get(name) for name in expected} == expected


def test_no_created_series_unlike_prometheus_client_default(metrics: OperatorMetrics) -> None:
    metrics.added(CTRL)
    metrics.reconcile_finished(controller=CTRL, result="success", seconds=1)
    assert not [s for s in samples(metrics) if s.name.endswith("_created")]
    assert "_total_created" not in metrics.render().decode()
    assert "_count_created" not in metrics.render().decode()


def test_registries_are_independent() -> None:
    first, second = OperatorMetrics(), OperatorMetrics()
    first.added(CTRL)
    assert value(first, "workqueue_adds_total", name=CTRL, controller=CTRL) == 1
    assert value(second, "workqueue_adds_total", name=CTRL, controller=CTRL) is None


def test_build_info_is_one_and_replaced_by_a_second_call(metrics: OperatorMetrics) -> None:
    metrics.set_build_info(version="0.1.0", commit="abc123")
    assert value(metrics, "ansible_operator_build_info", commit="abc123", version="0.1.0") == 1
    metrics.set_build_info(version="0.2.0", commit="def456")
    rows = [s for s in samples(metrics) if s.name == "ansible_operator_build_info"]
    assert [(r.labels, r.value) for r in rows] == [({"commit": "def456", "version": "0.2.0"}, 1)]


def test_register_controller_sets_max_concurrency_and_zero_series(metrics: OperatorMetrics) -> None:
    metrics.register_controller(controller=CTRL, gvk=GVK, max_concurrent_reconciles=4)
    assert value(metrics, "controller_runtime_max_concurrent_reconciles", controller=CTRL) == 4
    assert value(metrics, "controller_runtime_active_workers", controller=CTRL) == 0
    for result in ("success", "error", "requeue", "requeue_after"):
        total = value(metrics, "controller_runtime_reconcile_total", controller=CTRL, result=result)
        assert total == 0
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller=CTRL) == 0
    assert value(metrics, "ansible_operator_run_failures_total", gvk=GVK) == 0


def test_reconcile_finished_counts_results_errors_and_time(metrics: OperatorMetrics) -> None:
    metrics.reconcile_finished(controller=CTRL, result="success", seconds=0.3)
    metrics.reconcile_finished(controller=CTRL, result="error", seconds=2.0)
    metrics.reconcile_finished(controller=CTRL, result="requeue_after", seconds=0.1)
    total = "controller_runtime_reconcile_total"
    assert value(metrics, total, controller=CTRL, result="success") == 1
    assert value(metrics, total, controller=CTRL, result="error") == 1
    assert value(metrics, total, controller=CTRL, result="requeue_after") == 1
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller=CTRL) == 1
    time_ = "controller_runtime_reconcile_time_seconds"
    assert value(metrics, f"{time_}_count", controller=CTRL) == 3
    assert value(metrics, f"{time_}_sum", controller=CTRL) == pytest.approx(2.4)
    # controller-runtime's bucket boundaries, exactly
    assert value(metrics, f"{time_}_bucket", controller=CTRL, le="0.35") == 2
    assert value(metrics, f"{time_}_bucket", controller=CTRL, le="60.0") == 3


def test_reconcile_finished_rejects_unknown_results(metrics: OperatorMetrics) -> None:
    with pytest.raises(ValueError, match="requeue_after"):
        metrics.reconcile_finished(controller=CTRL, result="ok", seconds=1)  # type: ignore[arg-type]


def test_reconcile_result_counts_succeeded_and_failed_per_gvk(metrics: OperatorMetrics) -> None:
    metrics.reconcile_result(gvk=GVK, succeeded=True)
    metrics.reconcile_result(gvk=GVK, succeeded=True)
    metrics.reconcile_result(gvk=GVK, succeeded=False)
    name = "ansible_operator_reconcile_result"
    assert value(metrics, name, GVK=GVK, result="succeeded") == 2
    assert value(metrics, name, GVK=GVK, result="failed") == 1


def test_run_finished_observes_the_whole_run(metrics: OperatorMetrics) -> None:
    metrics.run_finished(gvk=GVK, outcome="successful", seconds=1200.0)
    metrics.run_finished(gvk=GVK, outcome="failed", seconds=3.0)
    metrics.run_finished(gvk=GVK, outcome="timeout", seconds=1800.0)
    # The reference's histogram, now over whole runs; its buckets reach 30 minutes.
    rec = "ansible_operator_reconciles"
    assert value(metrics, f"{rec}_count", GVK=GVK) == 3
    assert value(metrics, f"{rec}_sum", GVK=GVK) == 3003.0
    assert value(metrics, f"{rec}_bucket", GVK=GVK, le="10.0") == 1
    assert value(metrics, f"{rec}_bucket", GVK=GVK, le="1800.0") == 3
    run = "ansible_operator_run_duration_seconds"
    assert value(metrics, f"{run}_count", gvk=GVK, outcome="successful") == 1
    assert value(metrics, f"{run}_bucket", gvk=GVK, outcome="successful", le="600.0") == 0
    assert value(metrics, f"{run}_bucket", gvk=GVK, outcome="successful", le="1200.0") == 1
    assert value(metrics, f"{run}_bucket", gvk=GVK, outcome="failed", le="0.5") == 0
    assert value(metrics, f"{run}_bucket", gvk=GVK, outcome="failed", le="5.0") == 1
    assert value(metrics, "ansible_operator_run_failures_total", gvk=GVK) == 2


def test_run_finished_rejects_unknown_outcomes(metrics: OperatorMetrics) -> None:
    with pytest.raises(ValueError, match="successful"):
        metrics.run_finished(gvk=GVK, outcome="weird", seconds=1)  # type: ignore[arg-type]


def test_resource_created_at_is_set_updated_and_removed(metrics: OperatorMetrics) -> None:
    labels = {"name": "sample", "namespace": "ns", "group": "cache.example.com"}
    labels |= {"version": "v1alpha1", "kind": "Memcached"}
    metrics.resource_created(**labels, created_at=1_700_000_000.0)
    assert value(metrics, "resource_created_at_seconds", **labels) == 1_700_000_000.0
    # the exact line the Go operator's e2e test greps for (labels sorted by name)
    assert (
        'resource_created_at_seconds{group="cache.example.com",kind="Memcached",'
        'name="sample",namespace="ns",version="v1alpha1"} 1.7e+09'
    ) in metrics.render().decode()
    metrics.resource_updated(**labels, created_at=1_700_000_001.0)
    assert value(metrics, "resource_created_at_seconds", **labels) == 1_700_000_001.0
    metrics.resource_deleted(**labels)
    assert value(metrics, "resource_created_at_seconds", **labels) is None
    metrics.resource_deleted(**labels)  # deleting twice (or unseen) is harmless


def test_leader_status(metrics: OperatorMetrics) -> None:
    metrics.leader_status(name="memcached-operator", leading=False)
    assert value(metrics, "leader_election_master_status", name="memcached-operator") == 0
    metrics.leader_status(name="memcached-operator", leading=True)
    assert value(metrics, "leader_election_master_status", name="memcached-operator") == 1


def test_queue_observer_protocol(metrics: OperatorMetrics) -> None:
    observer: QueueObserver = metrics  # checked by mypy: the Protocol is implemented
    observer.added(CTRL)
    observer.added(CTRL)
    observer.depth(CTRL, 2)
    observer.queued(CTRL, 0.002)
    observer.worked(CTRL, 12.5)
    observer.retried(CTRL)
    observer.active(CTRL, 3)
    both = {"name": CTRL, "controller": CTRL}
    assert value(metrics, "workqueue_adds_total", **both) == 2
    assert value(metrics, "workqueue_depth", **both) == 2
    assert value(metrics, "workqueue_queue_duration_seconds_count", **both) == 1
    assert value(metrics, "workqueue_queue_duration_seconds_bucket", **both, le="0.01") == 1
    assert value(metrics, "workqueue_queue_duration_seconds_bucket", **both, le="0.001") == 0
    assert value(metrics, "workqueue_work_duration_seconds_sum", **both) == 12.5
    assert value(metrics, "workqueue_retries_total", **both) == 1
    assert value(metrics, "controller_runtime_active_workers", controller=CTRL) == 3


# --- the server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> OperatorMetrics:
    return OperatorMetrics()


@pytest.fixture(scope="module")
def server(served: OperatorMetrics) -> Iterator[MetricsServer]:
    # One server for the module: stopping one waits for its poll interval.
    srv = MetricsServer(served, bind="127.0.0.1:0")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def get(
    port: int, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers=headers or {})
    return conn.getresponse()


def test_server_serves_metrics_text(served: OperatorMetrics, server: MetricsServer) -> None:
    served.set_build_info(version="0.1.0", commit="abc")
    assert server.port
    response = get(server.port, "/metrics")
    body = response.read().decode()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name for f in text_string_to_metric_families(body)}
    assert {"ansible_operator_build_info", "controller_runtime_reconcile"} <= families
    assert 'ansible_operator_build_info{commit="abc",version="0.1.0"} 1.0' in body


def test_server_compresses_for_scrapers_that_accept_gzip(server: MetricsServer) -> None:
    assert server.port
    response = get(server.port, "/metrics", headers={"Accept-Encoding": "gzip"})
    assert response.getheader("Content-Encoding") == "gzip"
    assert b"# TYPE workqueue_depth gauge" in gzip.decompress(response.read())


def test_server_answers_404_elsewhere_and_head_without_body(server: MetricsServer) -> None:
    assert server.port
    missing = get(server.port, "/")
    assert (missing.status, missing.read()) == (404, b"404 page not found\n")
    head = get(server.port, "/metrics", method="HEAD")
    assert head.status == 200
    assert int(head.getheader("Content-Length") or 0) > 0
    assert head.read() == b""


def test_disabled_server_does_nothing(metrics: OperatorMetrics) -> None:
    srv = MetricsServer(metrics, bind="0")
    srv.start()
    assert (srv.enabled, srv.port) == (False, None)
    srv.stop()


def test_stop_releases_the_port_and_is_idempotent(metrics: OperatorMetrics) -> None:
    srv = MetricsServer(metrics, bind="127.0.0.1:0")
    srv.start()
    port = srv.port
    srv.stop()
    srv.stop()
    again = MetricsServer(metrics, bind=f"127.0.0.1:{port}")
    with again:
        assert again.port == port


def test_busy_port_raises_bind_error_naming_the_address(metrics: OperatorMetrics) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        srv = MetricsServer(metrics, bind=address)
        with pytest.raises(BindError) as caught:
            srv.start()
    message = str(caught.value)
    assert address in message
    assert "--metrics-bind-address" in message
    assert srv.port is None


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        (":8443", "", 8443),
        ("127.0.0.1:0", "127.0.0.1", 0),
        ("[::1]:8080", "::1", 8080),
        ("localhost:", "localhost", 0),
    ],
)
def test_bind_address_syntax(text: str, host: str, port: int) -> None:
    parsed = parse_bind_address(text, flag="--metrics-bind-address")
    assert parsed is not None
    assert (parsed.host, parsed.port) == (host, port)


@pytest.mark.parametrize("text", ["8443", "1.2.3.4:99999", "::1:80", "[::1]80", "host:nonsense"])
def test_bad_bind_addresses_fail_at_construction(metrics: OperatorMetrics, text: str) -> None:
    with pytest.raises(BindError, match="--metrics-bind-address"):
        MetricsServer(metrics, bind=text)


def test_all_interfaces_listens_on_loopback_too(metrics: OperatorMetrics) -> None:
    with MetricsServer(metrics, bind=":0") as srv:
        assert srv.port
        assert get(srv.port, "/metrics").status == 200
