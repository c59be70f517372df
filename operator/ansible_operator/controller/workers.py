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

Applying an `Outcome`, as controller-runtime does with a reconcile result
(spec §5.2, §5.4), and the error classes as errors.py defines them:

* `error` is an errors.Permanent the reconciler returned: it has already
  been reported on the CR (Failure condition, Warning Event), and retrying
  the same input cannot help. Reset the backoff and come back only at
  `requeue_after` (the reconcile period), at RESYNC priority; a change of
  the CR re-adds it sooner through the watch;
* `error` is an errors.RetryLater with a `delay`: re-add after exactly that
  delay at RETRY priority (the failure still counts towards the backoff);
* any other `error`, or the handler raised (whatever the class: nothing was
  reported): re-add with per-key exponential backoff at RETRY priority; any
  requeue_after is ignored;
* `forget`: the object is gone: reset its backoff and do not come back;
* otherwise success: reset its backoff and, if `requeue_after` > 0, come
  back then at RESYNC priority.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ansible_operator.controller.queue import Key, Priority, WorkQueue
from ansible_operator.errors import Permanent, RetryLater

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reconcile asks the queue to do next with its key."""

    requeue_after: float | None = None  # seconds until the next periodic run
    error: BaseException | None = None  # the reconcile failed: see the module docstring
    forget: bool = False  # the object is gone: no retry, no requeue


class WorkerPool:
    """`workers` daemon threads looping get -> handler -> apply the outcome -> done."""

    def __init__(
        self,
        queue: WorkQueue,
        handler: Callable[[Key], Outcome],
        *,
        workers: int,
        name: str = "reconcile",
    ) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {workers}")
        self._queue = queue
        self._handler = handler
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
                outcome, raised = self._call(key)
                self._apply(key, outcome, raised=raised)
            except Exception:
                # Only the queue calls are left to fail here; keep the worker.
                _log.exception("Requeueing %s failed", str(key))
            finally:
                with self._lock:
                    self._busy -= 1
                self._queue.done(key)

    def _call(self, key: Key) -> tuple[Outcome, bool]:
        """The handler's outcome, and whether it raised instead of returning one."""
        try:
            return self._handler(key), False
        except Exception as err:
            # A bug in the reconciler must not kill the worker or lose the key.
            _log.exception("Reconcile of %s raised an exception", str(key))
            return Outcome(error=err), True

    def _apply(self, key: Key, outcome: Outcome, *, raised: bool) -> None:
        error = outcome.error
        if error is None or (isinstance(error, Permanent) and not raised):
            # Success, or a permanent error already reported: no backoff.
            self._queue.forget(key)
            if outcome.forget:
                return
            if outcome.requeue_after is not None and outcome.requeue_after > 0:
                self._queue.add_after(key, outcome.requeue_after, priority=Priority.RESYNC)
            if error is not None:
                _log.debug("Not retrying %s until it changes: %s", str(key), str(error))
            return
        asked = error.delay if isinstance(error, RetryLater) else None
        delay = self._queue.add_rate_limited(key, delay=asked)
        _log.debug("Retrying %s in %.3fs after: %s", str(key), delay, str(error))
