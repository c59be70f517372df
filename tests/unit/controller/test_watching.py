"""The primary watch's predicates: which kopf events reach the work queue, and how urgently."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.config.selectors import LabelSelector
from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.contract import Key
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.watching import PrimaryWatch

WATCH = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"))


def body(
    *,
    generation: int | None = 1,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    status: Any = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": "ns"}
    if generation is not None:
        meta["generation"] = generation
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    obj: dict[str, Any] = {"metadata": meta}
    if status is not None:
        obj["status"] = status
    return obj


def primary(watch: Watch = WATCH) -> tuple[PrimaryWatch, WorkQueue]:
    queue = WorkQueue(total_limit=4, backoff_base=1.0, backoff_max=10.0)
    return PrimaryWatch(watch, queue), queue


def test_controller_name_is_the_go_operators() -> None:
    assert WATCH.controller_name == "memcached-v1alpha1-controller"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (None, Priority.CHANGE),
        ({"conditions": []}, Priority.CHANGE),
        ({"conditions": [{"type": "Running"}]}, Priority.RESYNC),
    ],
)
def test_initial_listing_puts_never_reconciled_crs_first(status: Any, expected: Priority) -> None:
    watch, queue = primary()
    assert watch.handle(None, body(status=status)) == expected
    assert queue.get(timeout=0) == Key("memcached-v1alpha1-controller", "ns", "m")


@pytest.mark.parametrize(
    ("first", "second", "annotations_matter", "expected"),
    [
        (body(generation=1), body(generation=2), False, Priority.CHANGE),  # spec changed
        (body(generation=1), body(generation=1, status={"x": 1}), False, None),  # our status write
        (
            body(generation=None),
            body(generation=None),
            False,
            Priority.CHANGE,
        ),  # no generation: Secrets
        (body(annotations={"a": "1"}), body(annotations={"a": "2"}), False, None),
        (body(annotations={"a": "1"}), body(annotations={"a": "2"}), True, Priority.CHANGE),
        (body(labels={"x": "1"}), body(labels={"x": "2"}), True, None),
    ],
)
def test_update_predicates(
    first: dict[str, Any],
    second: dict[str, Any],
    annotations_matter: bool,
    expected: Priority | None,
) -> None:
    watch, queue = primary(Watch(gvk=WATCH.gvk, watch_annotations_changes=annotations_matter))
    watch.handle("ADDED", first)
    queue.get(timeout=0)
    queue.done(Key("memcached-v1alpha1-controller", "ns", "m"))
    assert watch.handle("MODIFIED", second) == expected
    assert queue.depth() == (0 if expected is None else 1)


def test_deletion_is_always_enqueued_and_forgotten() -> None:
    watch, _queue = primary()
    watch.handle("ADDED", body())
    assert watch.handle("DELETED", body()) == Priority.CHANGE
    # after a DELETED event the object is new again
    assert watch.handle("MODIFIED", body()) == Priority.CHANGE


def test_selector_filters_every_event_type() -> None:
    selector = LabelSelector(match_labels={"pick": "yes"})
    watch, queue = primary(Watch(gvk=WATCH.gvk, selector=selector))
    assert watch.handle("ADDED", body(labels={"pick": "no"})) is None
    assert watch.handle("DELETED", body()) is None
    assert queue.depth() == 0
    assert watch.handle("ADDED", body(labels={"pick": "yes"})) == Priority.CHANGE


def test_every_event_is_reported_to_the_object_hook_even_when_filtered() -> None:
    seen: list[str] = []
    queue = WorkQueue(total_limit=1, backoff_base=1.0, backoff_max=1.0)
    watch = PrimaryWatch(
        Watch(gvk=WATCH.gvk, selector=LabelSelector(match_labels={"a": "b"})),
        queue,
        on_object=lambda t, _: seen.append(t),
    )
    watch.handle(None, body())
    watch.handle("DELETED", body())
    assert seen == ["ADDED", "DELETED"]
