"""The worker threads that run reconciles, and what they do with each result.

Where it sits in the flow::

    kopf event handlers --add()--> WorkQueue --get()--> WorkerPool --handler(key)--> reconciler
                                       ^                     |
                                       +---- the Outcome ----+

The operator's start-up code builds one `WorkerPool` over the shared
`controller.queue.WorkQueue`, with the reconciler as `handler`, and calls
`stop()` on shutdown. Each reconcile waits for an Ansible process for seconds,
so workers are plain threads; the queue, not the pool size, decides how many
reconciles run per kind and in total (the pool just needs enough threads to
fill `total_limit`).

What each `Outcome` makes the queue do, and which result the reconcile metric
counts, is decided in one place, controller/contract.py's `decide()`; this
module only applies it. A handler that raises (whatever the exception: nothing
was reported on the CR) counts as `Outcome(error=...)`: backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ansible_operator.controller.contract import (
    Action,
    Key,
    Outcome,
    ReconcileMetrics,
    decide,
)
from ansible_operator.controller.queue import Priority, WorkQueue

_log = logging.getLogger(__name__)


class WorkerPool:
    """`workers` daemon threads looping get -> handler -> apply the outcome -> done."""

    def __init__(
        self,
        queue: WorkQueue,
        handler: Callable[[Key], Outcome],
        *,
        workers: int,
        name: str = "reconcile",
        metrics: ReconcileMetrics | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {workers}")
        self._queue = queue
        self._handler = handler
        self._metrics = metrics
        self._lock = threading.Lock()
        self._busy = 0
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{index}", daemon=True)
            for index in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def busy(self) -> int:
        """Workers running a handler right now."""
        with self._lock:
            return self._busy

    def stop(
        self,
        *,
        grace: float,
        cancel: Callable[[], None] | None = None,
        after_cancel: float = 5.0,
    ) -> bool:
        """Stop taking work, let running handlers finish; True if every worker ended.

        New work stops at once. Handlers get `grace` seconds to finish; then
        `cancel()` (which should make them return, e.g. by killing their
        Ansible processes) is called and they get `after_cancel` seconds more.
        """
        self._queue.shutdown()
        if self._join(time.monotonic() + max(0.0, grace)):
            return True
        if cancel is None:
            return False
        _log.warning("%d reconcile(s) still running after %.1fs; cancelling", self.busy(), grace)
        try:
            cancel()
        except Exception:
            _log.exception("Cancelling the running reconciles failed")
        return self._join(time.monotonic() + max(0.0, after_cancel))

    def _join(self, deadline: float) -> bool:
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _run(self) -> None:
        while True:
            key = self._queue.get()
            if key is None:
                return  # the queue was shut down
            with self._lock:
                self._busy += 1
            try:
                self._apply(key, self._call(key))
            except Exception:
                # Only the queue calls are left to fail here; keep the worker.
                _log.exception("Requeueing %s failed", str(key))
            finally:
                with self._lock:
                    self._busy -= 1
                self._queue.done(key)

    def _call(self, key: Key) -> Outcome:
        """The handler's outcome (timed for the metrics); a raise is an error outcome."""
        started = time.monotonic()
        try:
            outcome = self._handler(key)
        except Exception as err:
            # A bug in the reconciler must not kill the worker or lose the key.
            _log.exception("Reconcile of %s raised an exception", str(key))
            outcome = Outcome(error=err)
        decision = decide(outcome)
        if self._metrics is not None and decision.label is not None:
            seconds = time.monotonic() - started
            self._metrics.reconciled(
                controller=key.controller, result=decision.label, seconds=seconds
            )
        return outcome

    def _apply(self, key: Key, outcome: Outcome) -> None:
        decision = decide(outcome)
        if decision.action is Action.BACKOFF:
            delay = self._queue.add_rate_limited(key, delay=decision.delay)
            _log.debug("Retrying %s in %.3fs after: %s", str(key), delay, decision.why)
            return
        self._queue.forget(key)
        if decision.action is Action.RESYNC and decision.delay is not None:
            self._queue.add_after(key, decision.delay, priority=Priority.RESYNC)
        _log.debug("%s: %s", str(key), decision.why)
