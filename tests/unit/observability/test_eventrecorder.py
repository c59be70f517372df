"""The Event recorder (observability.eventrecorder) on a fake EventPoster: no cluster.

What it does with each of errors.py's errors from its poster: retry
KubeUnavailable and a 408, re-create an Event whose patch found it gone
(NotFound), give up at once on any other refusal.
tests/observability/test_eventrecorder.py posts to the testbed's API server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ansible_operator.errors import ApiError, KubeUnavailable, NotFound
from ansible_operator.observability.eventrecorder import EventRecorder, ObjectRef

REF = ObjectRef(api_version="g.example.com/v1", kind="Thing", namespace="ns", name="t", uid="u")


class FakePoster:
    """Keeps what was posted; `failures[verb]` are raised first, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.failures: dict[str, list[Exception]] = {"create": [], "patch": []}

    def _call(self, verb: str, namespace: str, body: Mapping[str, Any], timeout: float) -> None:
        assert timeout == 10.0
        with self.lock:
            self.calls.append((verb, namespace, dict(body)))
            if self.failures[verb]:
                raise self.failures[verb].pop(0)

    def create(self, namespace: str, body: Mapping[str, Any], *, timeout: float) -> None:
        self._call("create", namespace, body, timeout)

    def patch(self, namespace: str, name: str, body: Mapping[str, Any], *, timeout: float) -> None:
        self._call("patch", namespace, body, timeout)

    def verbs(self) -> list[str]:
        with self.lock:
            return [verb for verb, _, _ in self.calls]


@pytest.fixture
def poster() -> FakePoster:
    return FakePoster()


@pytest.fixture
def recorder(poster: FakePoster) -> Iterator[EventRecorder]:
    made = EventRecorder(poster, instance="test", retry_delay=0.001)
    yield made
    made.stop(timeout=5)


def test_an_event_is_created_then_aggregated_by_a_patch(
    poster: FakePoster, recorder: EventRecorder
) -> None:
    for _ in range(2):
        recorder.record(REF, type="Normal", reason="Ran", message="ok")
    assert recorder.flush(5)
    assert poster.verbs() == ["create", "patch"]
    _, namespace, body = poster.calls[0]
    assert (namespace, body["reason"], body["count"]) == ("ns", "Ran", 1)
    assert poster.calls[1][2]["count"] == 2


@pytest.mark.parametrize(
    "error", [KubeUnavailable("HTTP 503: down"), ApiError(408, "timeout")], ids=str
)
def test_transient_failures_are_retried(
    poster: FakePoster, recorder: EventRecorder, error: Exception
) -> None:
    poster.failures["create"] = [error, error]
    recorder.record(REF, type="Normal", reason="Ran", message="ok")
    assert recorder.flush(5)
    assert poster.verbs() == ["create"] * 3
    assert (recorder.stats.created, recorder.stats.failed) == (1, 0)


def test_a_refusal_is_counted_and_not_retried(poster: FakePoster, recorder: EventRecorder) -> None:
    poster.failures["create"] = [NotFound(404, 'namespaces "ns" not found')]
    recorder.record(REF, type="Normal", reason="Ran", message="ok")
    assert recorder.flush(5)
    assert poster.verbs() == ["create"]
    assert (recorder.stats.created, recorder.stats.failed) == (0, 1)


def test_an_event_gone_server_side_is_created_again_with_its_count(
    poster: FakePoster, recorder: EventRecorder
) -> None:
    recorder.record(REF, type="Normal", reason="Ran", message="ok")
    assert recorder.flush(5)
    poster.failures["patch"] = [NotFound(404, "expired")]
    recorder.record(REF, type="Normal", reason="Ran", message="ok")
    assert recorder.flush(5)
    assert poster.verbs() == ["create", "patch", "create"]
    assert poster.calls[-1][2]["count"] == 2
    assert (recorder.stats.created, recorder.stats.patched, recorder.stats.failed) == (2, 0, 0)


def test_events_of_cluster_scoped_objects_go_to_default(
    poster: FakePoster, recorder: EventRecorder
) -> None:
    top = ObjectRef(api_version="v1", kind="Namespace", namespace="", name="n")
    recorder.record(top, type="Warning", reason="Odd", message="x")
    assert recorder.flush(5)
    _, namespace, body = poster.calls[0]
    assert namespace == "default"
    assert "namespace" not in body["involvedObject"]
