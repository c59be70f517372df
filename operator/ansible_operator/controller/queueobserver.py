"""The seam between the work queue and whoever measures it.

The queue (controller.queue) calls a `QueueObserver` as items move through it;
observability.metrics provides the Prometheus implementation, tests use
`NullObserver` or their own recorder. `queue` names one watched kind: the
controller name `<lower kind>-<lower version>-controller`, as the Go operator
labels its workqueue metrics.
"""

from __future__ import annotations

from typing import Protocol


class QueueObserver(Protocol):
    def added(self, queue: str) -> None:
        """An item was added (or re-added) to the queue."""

    def depth(self, queue: str, items: int) -> None:
        """Items waiting (not in flight, not delayed) for this queue, after a change."""

    def queued(self, queue: str, seconds: float) -> None:
        """An item waited this long between being ready and being handed to a worker."""

    def worked(self, queue: str, seconds: float) -> None:
        """A worker spent this long handling one item."""

    def retried(self, queue: str) -> None:
        """An item was re-added with backoff after a failure."""

    def active(self, queue: str, workers: int) -> None:
        """Workers busy with this queue's items, after a change."""


class NullObserver:
    """Measures nothing."""

    def added(self, queue: str) -> None:
        return None

    def depth(self, queue: str, items: int) -> None:
        return None

    def queued(self, queue: str, seconds: float) -> None:
        return None

    def worked(self, queue: str, seconds: float) -> None:
        return None

    def retried(self, queue: str) -> None:
        return None

    def active(self, queue: str, workers: int) -> None:
        return None
