"""The latest body the watch saw of each queued CR, so the reconcile it caused needs no GET.

Where it sits: the primary watch (controller/watching.py) calls `keep()` when it
queues a CR for a change and `update()` on every other event of the kind; the
reconciler (controller/reconciler.py) calls `take()` when it starts, and reads
the CR live only when nothing is kept: a periodic reconcile, a retry, a key a
dependent's change queued, or a CR whose last event was its deletion.

Why: the Go operator reads its CRs from its informers' cache; we read each one
live, an API request per reconcile that the watch had just answered. Only
queued CRs are kept, and a reconcile takes its CR out, so the memory this costs
is bounded by the queue's length, not by the fleet's size.

Freshness: a body is replaced by every later event of the same CR until the
reconcile takes it. A reconcile may still start from a body older than the
stored object (its own status write was not yet seen by the watch, say); the
status write then conflicts on the resourceVersion and re-reads the object
(controller/statuswrite.py), as a live GET would have.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ansible_operator.controller.contract import Key

__all__ = ["WatchBodies"]


class WatchBodies:
    """Bodies by key; safe to use from kopf's loop and the worker threads at once."""

    def __init__(self) -> None:
        self._bodies: dict[Key, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def keep(self, key: Key, body: Mapping[str, Any]) -> None:
        """The watch queued `key` for this change: keep its body for the reconcile."""
        with self._lock:
            self._bodies[key] = dict(body)

    def update(self, key: Key, body: Mapping[str, Any]) -> None:
        """Any other event: a kept body is replaced by the newer one."""
        with self._lock:
            if key in self._bodies:
                self._bodies[key] = dict(body)

    def drop(self, key: Key) -> None:
        """The CR was deleted: the reconcile must see that live."""
        with self._lock:
            self._bodies.pop(key, None)

    def take(self, key: Key) -> dict[str, Any] | None:
        """The body kept for `key`, removed; None when nothing is kept."""
        with self._lock:
            return self._bodies.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._bodies)
