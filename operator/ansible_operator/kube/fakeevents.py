"""`FakeEvents`: an EventSink that records what it is given, for tests of the reconciler.

Where this sits: next to kube.fakekube.FakeKube (which re-exports it), for the
same tests: `Reconciler(kube=FakeKube(...), events=FakeEvents(), ...)`; the
reconciler (through controller.reporting) records an Event when a run starts,
succeeds or fails, and the test reads them back in order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ansible_operator.observability.eventrecorder import ObjectRef

__all__ = ["FakeEvents", "RecordedEvent"]


@dataclass(frozen=True)
class RecordedEvent:
    ref: ObjectRef
    type: str
    reason: str
    message: str


class FakeEvents:
    """An EventSink (controller.reporting) that keeps every Event it is given, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[RecordedEvent] = []

    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None:
        with self._lock:
            self._events.append(RecordedEvent(ref, type, reason, message))

    @property
    def events(self) -> list[RecordedEvent]:
        with self._lock:
            return list(self._events)

    def reasons(self) -> list[tuple[str, str]]:
        """(type, reason) of every Event so far, e.g. [("Normal", "Running"), ...]."""
        return [(e.type, e.reason) for e in self.events]
