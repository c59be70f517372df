"""End-to-end tests of observability.eventrecorder against a real Kubernetes API server.

A ConfigMap stands in for a custom resource as the involved object; the
recorder posts through a kube.eventposter.KubeEventPoster on the session's
API client, as the operator does, and the tests read the Events back with the
same client. Failures are injected by wrapping the poster's create call, so
what reaches the server is always real.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient, CoreV1Api, CoreV1Event, V1ConfigMap, V1ObjectMeta

from ansible_operator.errors import KubeUnavailable
from ansible_operator.kube.client import Kube
from ansible_operator.kube.eventposter import KubeEventPoster
from ansible_operator.kube.librarylogin import LibraryLogin
from ansible_operator.observability.eventrecorder import MESSAGE_LIMIT, EventRecorder, ObjectRef

pytestmark = pytest.mark.cluster


@pytest.fixture
def core(api_client: ApiClient) -> CoreV1Api:
    return CoreV1Api(api_client)


@pytest.fixture
def subject(core: CoreV1Api, namespace: str) -> ObjectRef:
    created = core.create_namespaced_config_map(
        namespace, V1ConfigMap(metadata=V1ObjectMeta(name="subject"), data={"k": "v"})
    )
    assert created.metadata
    assert created.metadata.uid
    return ObjectRef.from_object(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": namespace, "name": "subject", "uid": created.metadata.uid},
        }
    )


@pytest.fixture
def make_recorder(api_client: ApiClient) -> Iterator[Callable[..., EventRecorder]]:
    made: list[EventRecorder] = []

    def make(**options: Any) -> EventRecorder:
        recorder = EventRecorder(
            KubeEventPoster(Kube(LibraryLogin(api_client.configuration))),
            instance="test-instance",
            **options,
        )
        made.append(recorder)
        return recorder

    yield make
    for recorder in made:
        recorder.stop(timeout=5)


@pytest.fixture
def recorder(make_recorder: Callable[..., EventRecorder]) -> EventRecorder:
    return make_recorder()


def events(core: CoreV1Api, namespace: str, ref: ObjectRef, reason: str) -> list[CoreV1Event]:
    found = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={ref.name},reason={reason}"
    ).items
    return [e for e in found if e.involved_object.uid == (ref.uid or None)]


def test_an_event_about_an_object(
    core: CoreV1Api, subject: ObjectRef, recorder: EventRecorder
) -> None:
    recorder.record(subject, type="Normal", reason="Reconciled", message="Role memcached ran")
    assert recorder.flush(10)
    [event] = events(core, subject.namespace, subject, "Reconciled")
    assert (event.type, event.reason, event.message, event.count) == (
        "Normal",
        "Reconciled",
        "Role memcached ran",
        1,
    )
    involved = event.involved_object
    assert (
        involved.api_version,
        involved.kind,
        involved.namespace,
        involved.name,
        involved.uid,
    ) == (
        "v1",
        "ConfigMap",
        subject.namespace,
        "subject",
        subject.uid,
    )
    assert event.metadata
    assert event.metadata.namespace == subject.namespace
    assert event.metadata.name
    assert event.metadata.name.startswith("subject.")
    assert event.source
    assert event.source.component == "ansible-operator"
    assert (event.reporting_component, event.reporting_instance) == (
        "ansible-operator",
        "test-instance",
    )
    assert event.first_timestamp is not None
    assert event.first_timestamp == event.last_timestamp


def test_identical_events_aggregate_into_one(
    core: CoreV1Api, subject: ObjectRef, recorder: EventRecorder
) -> None:
    for _ in range(3):
        recorder.record(subject, type="Warning", reason="Failed", message="task x failed")
    recorder.record(subject, type="Warning", reason="Failed", message="task y failed")
    assert recorder.flush(10)
    found = sorted(events(core, subject.namespace, subject, "Failed"), key=lambda e: e.count or 0)
    assert [(e.message, e.count, e.type) for e in found] == [
        ("task y failed", 1, "Warning"),
        ("task x failed", 3, "Warning"),
    ]
    stats = recorder.stats
    assert (stats.recorded, stats.created, stats.patched, stats.failed) == (4, 2, 2, 0)


def test_an_event_deleted_server_side_is_posted_again(
    core: CoreV1Api, subject: ObjectRef, recorder: EventRecorder
) -> None:
    recorder.record(subject, type="Normal", reason="Again", message="same")
    assert recorder.flush(10)
    [first] = events(core, subject.namespace, subject, "Again")
    assert first.metadata
    assert first.metadata.name
    core.delete_namespaced_event(first.metadata.name, subject.namespace)
    recorder.record(subject, type="Normal", reason="Again", message="same")
    assert recorder.flush(10)
    [second] = events(core, subject.namespace, subject, "Again")
    assert second.count == 2  # the count survives; the patch found nothing and it was re-created
    assert (recorder.stats.created, recorder.stats.failed) == (2, 0)


def test_long_messages_are_truncated_to_the_api_limit(
    core: CoreV1Api, subject: ObjectRef, recorder: EventRecorder
) -> None:
    recorder.record(subject, type="Warning", reason="Long", message="é" * 3000)
    assert recorder.flush(10)
    [event] = events(core, subject.namespace, subject, "Long")
    assert event.message
    assert len(event.message.encode()) <= MESSAGE_LIMIT
    assert event.message.endswith("...")


def test_cluster_scoped_objects_get_events_in_default(
    core: CoreV1Api, namespace: str, recorder: EventRecorder
) -> None:
    ns = core.read_namespace(namespace)
    assert ns.metadata
    assert ns.metadata.uid
    ref = ObjectRef(
        api_version="v1", kind="Namespace", namespace="", name=namespace, uid=ns.metadata.uid
    )
    reason = f"Scoped{uuid.uuid4().hex[:8]}"
    recorder.record(ref, type="Normal", reason=reason, message="cluster-scoped")
    assert recorder.flush(10)
    found = events(core, "default", ref, reason)
    try:
        assert [(e.message, e.involved_object.namespace) for e in found] == [
            ("cluster-scoped", None)
        ]
    finally:
        for event in found:
            assert event.metadata
            assert event.metadata.name
            core.delete_namespaced_event(event.metadata.name, "default")


def test_a_hot_loop_is_rate_limited_and_logged_once(
    core: CoreV1Api,
    subject: ObjectRef,
    make_recorder: Callable[..., EventRecorder],
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = make_recorder(burst=3, refill_seconds=3600)
    with caplog.at_level(logging.WARNING, logger="ansible_operator.observability.events"):
        for attempt in range(10):
            recorder.record(subject, type="Normal", reason="Hot", message=f"attempt {attempt}")
    assert recorder.flush(10)
    assert len(events(core, subject.namespace, subject, "Hot")) == 3
    assert (recorder.stats.recorded, recorder.stats.dropped_rate_limited) == (3, 7)
    assert len([r for r in caplog.records if "Too many Events" in r.getMessage()]) == 1


def test_transient_failures_are_retried(
    core: CoreV1Api,
    subject: ObjectRef,
    make_recorder: Callable[..., EventRecorder],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = make_recorder(retry_delay=0.01)
    real = recorder._poster.create
    calls = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise KubeUnavailable("HTTP 503: Service Unavailable")
        return real(*args, **kwargs)

    monkeypatch.setattr(recorder._poster, "create", flaky)
    recorder.record(subject, type="Normal", reason="Flaky", message="eventually")
    assert recorder.flush(10)
    assert len(calls) == 3
    assert len(events(core, subject.namespace, subject, "Flaky")) == 1
    assert recorder.stats.failed == 0


def test_rejected_events_are_counted_not_retried(
    make_recorder: Callable[..., EventRecorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = make_recorder(retry_delay=0.01)
    real = recorder._poster.create
    calls = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(recorder._poster, "create", counting)
    # The API server refuses Events in a namespace that does not exist (404).
    ghost = ObjectRef(api_version="v1", kind="ConfigMap", namespace="no-such-ns-x", name="x")
    recorder.record(ghost, type="Normal", reason="Nowhere", message="refused")
    assert recorder.flush(10)
    assert (calls, recorder.stats.failed, recorder.stats.created) == (1, 1, 0)


def test_record_never_blocks_when_the_queue_is_full(
    core: CoreV1Api,
    subject: ObjectRef,
    make_recorder: Callable[..., EventRecorder],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = make_recorder(queue_size=2)
    real = recorder._poster.create
    entered, gate = threading.Event(), threading.Event()

    def stalled(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        gate.wait(10)  # an API server that does not answer
        return real(*args, **kwargs)

    monkeypatch.setattr(recorder._poster, "create", stalled)
    recorder.record(subject, type="Normal", reason="Busy", message="in flight")
    assert entered.wait(5)
    started = time.monotonic()
    for n in range(7):
        recorder.record(subject, type="Normal", reason="Busy", message=f"queued {n}")
    assert time.monotonic() - started < 0.5
    assert (recorder.stats.recorded, recorder.stats.dropped_queue_full) == (3, 5)
    assert not recorder.flush(0.1)
    gate.set()
    assert recorder.flush(10)
    found = {e.message for e in events(core, subject.namespace, subject, "Busy")}
    assert found == {"in flight", "queued 0", "queued 1"}


def test_stop_posts_what_is_queued_then_ignores_records(
    core: CoreV1Api, subject: ObjectRef, make_recorder: Callable[..., EventRecorder]
) -> None:
    recorder = make_recorder()
    recorder.record(subject, type="Normal", reason="Stopping", message="before stop")
    recorder.stop(timeout=10)
    recorder.record(subject, type="Normal", reason="Stopping", message="after stop")
    assert [e.message for e in events(core, subject.namespace, subject, "Stopping")] == [
        "before stop"
    ]
    assert recorder.stats.recorded == 1


def test_unknown_event_types_are_refused(subject: ObjectRef, recorder: EventRecorder) -> None:
    with pytest.raises(ValueError, match="Normal or Warning"):
        recorder.record(subject, type="Error", reason="X", message="y")
