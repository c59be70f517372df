"""Unit tests of observability.health: controller-runtime's probe paths and bodies,
over real HTTP on 127.0.0.1."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator

import pytest

from ansible_operator.observability.health import BindError, HealthServer


class Readiness:
    """A `ready` callable the test can flip, called from the server's threads."""

    def __init__(self) -> None:
        self.state: tuple[bool, str] = (True, "")
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> tuple[bool, str]:
        with self._lock:
            self.calls += 1
            return self.state


@pytest.fixture(scope="module")
def shared_ready() -> Readiness:
    return Readiness()


@pytest.fixture
def ready(shared_ready: Readiness) -> Readiness:
    shared_ready.state = (True, "")
    shared_ready.calls = 0
    return shared_ready


@pytest.fixture(scope="module")
def port(shared_ready: Readiness) -> Iterator[int]:
    # One server for the module: stopping one waits for its poll interval.
    ready = shared_ready
    server = HealthServer(bind="127.0.0.1:0", ready=ready)
    server.start()
    try:
        assert server.port
        yield server.port
    finally:
        server.stop()


def get(port: int, path: str, *, method: str = "GET") -> tuple[int, str, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path)
    response = conn.getresponse()
    return response.status, response.read().decode(), response


@pytest.mark.parametrize(
    "path",
    ["/healthz", "/healthz/", "/healthz/ping", "/healthz/healthz", "/readyz", "/readyz/readyz"],
)
def test_every_probe_path_answers_ok(port: int, path: str) -> None:
    status, body, response = get(port, path)
    assert (status, body) == (200, "ok")
    assert response.getheader("Content-Type") == "text/plain; charset=utf-8"


def test_verbose_lists_checks_sorted_like_controller_runtime(port: int) -> None:
    assert get(port, "/healthz?verbose")[:2] == (
        200,
        "[+]healthz ok\n[+]ping ok\nhealthz check passed\n",
    )
    assert get(port, "/readyz?verbose=1")[:2] == (200, "[+]readyz ok\nhealthz check passed\n")


def test_exclude_skips_a_check_and_warns_about_unknown_names(port: int) -> None:
    status, body, _ = get(port, "/healthz?verbose&exclude=ping&exclude=nope")
    assert status == 200
    assert body == (
        "[+]healthz ok\n"
        "[+]ping excluded: ok\n"
        'warn: some health checks cannot be excluded: no matches for "nope"\n'
        "healthz check passed\n"
    )


def test_not_ready_is_500_with_the_reason(port: int, ready: Readiness) -> None:
    ready.state = (False, "watches not started yet")
    status, body, _ = get(port, "/readyz")
    assert status == 500
    assert body == "[-]readyz failed: watches not started yet\nhealthz check failed\n"
    assert get(port, "/readyz/readyz")[:2] == (
        500,
        "internal server error: watches not started yet\n",
    )
    # liveness does not depend on readiness
    assert get(port, "/healthz")[:2] == (200, "ok")
    ready.state = (True, "")
    assert get(port, "/readyz")[:2] == (200, "ok")


def test_reason_is_kept_on_one_line(port: int, ready: Readiness) -> None:
    ready.state = (False, "two\nlines")
    assert get(port, "/readyz")[1] == "[-]readyz failed: two lines\nhealthz check failed\n"


def test_a_raising_check_is_not_ready_without_leaking_the_error(port: int) -> None:
    def broken() -> tuple[bool, str]:
        raise RuntimeError("token=s3cr3t")

    with HealthServer(bind="127.0.0.1:0", ready=broken) as server:
        assert server.port
        status, body, _ = get(server.port, "/readyz")
    assert status == 500
    assert "s3cr3t" not in body
    assert body.startswith("[-]readyz failed: the readyz check raised an error\n")


def test_ready_is_called_per_probe(ready: Readiness, port: int) -> None:
    for _ in range(3):
        get(port, "/readyz")
    assert ready.calls == 3


@pytest.mark.parametrize("path", ["/", "/metrics", "/healthz/readyz", "/readyz/ping", "/livez"])
def test_unknown_paths_are_404(port: int, path: str) -> None:
    assert get(port, path)[:2] == (404, "404 page not found\n")


def test_head_has_no_body(port: int) -> None:
    status, body, response = get(port, "/healthz", method="HEAD")
    assert (status, body) == (200, "")
    assert response.getheader("Content-Length") == "2"


def test_concurrent_probes_are_served_in_parallel(ready: Readiness) -> None:
    gate = threading.Event()

    def slow() -> tuple[bool, str]:
        gate.wait(5)
        return True, ""

    with HealthServer(bind="127.0.0.1:0", ready=slow) as server:
        assert server.port
        port = server.port
        blocked = threading.Thread(target=get, args=(port, "/readyz"))
        blocked.start()
        try:
            # a readiness check that hangs must not stall liveness
            assert get(port, "/healthz")[:2] == (200, "ok")
        finally:
            gate.set()
            blocked.join(5)


def test_disabled_with_zero(ready: Readiness) -> None:
    server = HealthServer(bind="0", ready=ready)
    server.start()
    assert (server.enabled, server.port) == (False, None)
    server.stop()


def test_busy_port_raises_bind_error_naming_the_flag(ready: Readiness) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(BindError, match="--health-probe-bind-address") as caught:
            HealthServer(bind=address, ready=ready).start()
    assert address in str(caught.value)


def test_bad_address_fails_at_construction(ready: Readiness) -> None:
    with pytest.raises(BindError, match="missing port"):
        HealthServer(bind="6789", ready=ready)
