"""The work queue: which custom resource is reconciled next, and when.

Where it sits in the flow::

    kopf event handlers (asyncio, main thread)
        --add()-->  WorkQueue  --get()-->  WorkerPool threads  --> reconciler (handler)
        <--add_after() / add_rate_limited() / forget()-- outcome of each reconcile

The kopf event handlers call `add()` when a CR is created, changed or deleted,
or when one of its dependents changes; `controller.workers.WorkerPool` calls
`get()` / `done()` around each reconcile and turns the reconciler's outcome
into `add_after()` (periodic resync), `add_rate_limited()` (failure backoff)
or `forget()`.

It behaves like client-go's workqueue under controller-runtime (the Go
operator): level-triggered and keyed by object, so a CR is
waiting at most once and is never handled by two workers at the same time.
It differs where the Go operator hurts at scale:

* an operator-wide `total_limit` on reconciles in flight, on top of the
  per-kind limit, so a restart with hundreds of CRs cannot start hundreds of
  Ansible processes at once;
* priorities, so created or changed CRs go ahead of a backlog of resyncs.

Ordering and coalescing rules:

1. Priorities, highest first: CHANGE, RETRY, RESYNC. A failed CR whose backoff
   has run out is known to be off its desired state, so it goes before a
   periodic resync of a CR that last succeeded; the growing backoff keeps
   failing CRs from crowding out the rest.
2. `get()` returns the highest-priority item whose kind is below its limit,
   first-added first within a priority. Items of a kind at its limit are
   skipped, so a lower-priority item of another kind may go first. Nothing is
   handed out while `total_limit` reconciles are in flight.
3. A key waits at most once. Adding it again keeps the higher priority and
   the key's original place in line (its first add), even when the priority
   is raised: it has waited longest.
4. A key handed out is in flight until `done()`. Adds meanwhile mark it dirty
   (remembering the highest priority asked for); `done()` puts it back once,
   at the end of that priority's line.
5. Delayed adds wait in a timer heap, one per key: the earliest time asked for
   wins, with the highest priority asked for. When the time comes the key is
   added as above. Handing a key out drops its pending delayed add, because
   the outcome of that reconcile schedules the next one.

Over 400 lines on purpose: one lock-guarded state machine whose rules (1-5 above)
every method keeps; split in two, each part would have to re-establish them.

Delays, backoff and the metrics' durations use the injected clock (tests pass
a fake one); only get()'s own timeout is real time, like queue.Queue.get. Due
delayed adds move to the line on every call into the queue and when a
waiter's timed wait ends.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from ansible_operator.controller.contract import Key
from ansible_operator.controller.queueobserver import NullObserver, QueueObserver

# 2**64 times any sane base is far beyond any sane cap; stopping the exponent
# here keeps a key that fails forever from overflowing the float.
_MAX_EXPONENT = 64
# Each backoff is shortened by up to this fraction, so many CRs failing
# together (an API outage) do not all retry at the same instant.
_JITTER = 0.1


class Priority(IntEnum):
    """Why a key was added; a higher value is handed out first."""

    RESYNC = 0  # periodic reconcile (reconcilePeriod, requeue_after)
    RETRY = 1  # backoff after a failed reconcile has run out
    CHANGE = 2  # the CR was created, changed or deleted, or a dependent changed


_HIGHEST_FIRST = sorted(Priority, reverse=True)


@dataclass(slots=True)
class _Waiting:
    priority: Priority
    seq: int  # place in line: the global add order of the key's first add
    since: float  # clock time it became ready, for the queued-time metric


@dataclass(slots=True)
class _Delayed:
    due: float
    priority: Priority
    seq: int  # identifies the live heap entry; older entries are stale


class WorkQueue:
    """A thread-safe, prioritised, rate-limited queue of CR keys; see the module docstring.

    One lock guards everything and is only held for bookkeeping, so add*()
    are safe to call from the asyncio thread. The observer is called with the
    lock held (its gauges then always end on the latest value): it must be
    quick and must not call back into the queue.
    """

    def __init__(
        self,
        *,
        total_limit: int,
        backoff_base: float,
        backoff_max: float,
        observer: QueueObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if backoff_base <= 0 or backoff_max < backoff_base:
            raise ValueError(
                f"backoff needs 0 < base <= max, got base={backoff_base} max={backoff_max}"
            )
        self._total_limit = max(1, total_limit)
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._observer: QueueObserver = observer if observer is not None else NullObserver()
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._seq = itertools.count()
        self._shutting_down = False
        self._limits: dict[str, int] = {}
        # Ready keys: one heap of (seq, key) per priority and kind. Raising a
        # key's priority pushes a second entry; entries that no longer match
        # `_waiting` are stale and skipped when they reach the top.
        self._ready: dict[Priority, dict[str, list[tuple[int, Key]]]] = {p: {} for p in Priority}
        self._waiting: dict[Key, _Waiting] = {}
        self._depth: Counter[str] = Counter()
        self._timers: list[tuple[float, int, Key]] = []
        self._delayed: dict[Key, _Delayed] = {}
        self._started: dict[Key, float] = {}  # in flight, with the clock time handed out
        self._active: Counter[str] = Counter()
        self._dirty: dict[Key, Priority] = {}
        self._failures: dict[Key, int] = {}
        self._admit: Callable[[Key], bool] | None = None
        self._claimed: set[Key] = set()  # held by claim(), not handed out
        self._claims: Counter[str] = Counter()  # of those, per kind

    def set_admit(self, admit: Callable[[Key], bool] | None) -> None:
        """Let `add()` drop keys `admit` refuses (sharded mode: other replicas' CRs).

        Only `add()` asks: delayed adds and retries come from reconciles this
        replica ran, and the reconcile gate decides on those.
        """
        self._admit = admit

    def set_limit(self, queue: str, limit: int) -> None:
        """At most `limit` (at least 1) of `queue`'s keys in flight; unset = no per-kind cap."""
        with self._cond:
            self._limits[queue] = max(1, limit)
            # A raised limit may let several waiting keys go at once.
            self._cond.notify_all()

    def add(self, key: Key, *, priority: Priority = Priority.CHANGE) -> None:
        """Make `key` ready now. Never blocks; ignored after shutdown() or if not admitted."""
        admit = self._admit
        if admit is not None and not admit(key):
            return
        with self._cond:
            if self._shutting_down:
                return
            now = self._clock()
            self._promote(now)
            if self._enqueue(key, priority, now):
                self._cond.notify()

    def add_after(self, key: Key, delay: float, *, priority: Priority = Priority.RESYNC) -> None:
        """Make `key` ready `delay` seconds from now (at once if delay <= 0)."""
        with self._cond:
            if self._shutting_down:
                return
            now = self._clock()
            self._promote(now)
            if delay <= 0:
                if self._enqueue(key, priority, now):
                    self._cond.notify()
                return
            self._schedule(key, now + delay, priority)

    def add_rate_limited(self, key: Key, *, delay: float | None = None) -> float:
        """Count a failure of `key` and re-add it at RETRY priority after its backoff.

        The backoff is base * 2**(failures - 1), capped at max, shortened by up
        to 10% jitter. A `delay` given by the caller (errors.RetryLater.delay:
        the failing side said when to come back) replaces the backoff; the
        failure still counts, so later failures without one keep growing.
        Returns the delay used.
        """
        with self._cond:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            if delay is None:
                raw = self._backoff_base * 2.0 ** min(failures - 1, _MAX_EXPONENT)
                capped = min(raw, self._backoff_max)
                # Not cryptographic: only spreads retries apart in time.
                delay = capped * (1.0 - _JITTER * random.random())  # noqa: S311
            delay = max(0.0, delay)
            if self._shutting_down:
                return delay
            self._observer.retried(key.controller)
            now = self._clock()
            self._promote(now)
            self._schedule(key, now + delay, Priority.RETRY)
            return delay

    def forget(self, key: Key) -> None:
        """Reset `key`'s failure count, so its next backoff starts again at base."""
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: Key) -> int:
        """Failures counted for `key` since it was last forgotten."""
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> Key | None:
        """Hand out the next key; None on timeout or once shut down.

        Blocks until a key may go (see the module docstring). `timeout` is in
        real seconds, like queue.Queue.get: 0 polls, None waits for ever.
        The caller must call done(key) when it has finished with the key.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                now = self._clock()
                self._promote(now)
                key = self._take(now)
                if key is not None:
                    return key
                wait = self._next_due(now)
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                # Woken by add/done/set_limit/shutdown, or when the next delayed
                # add is due; the loop re-checks either way.
                self._cond.wait(wait)

    def done(self, key: Key) -> None:
        """Mark `key` finished; if it was added meanwhile, it is ready again."""
        with self._cond:
            if key in self._claimed:
                return  # held by claim(): release() ends it
            started = self._started.pop(key, None)
            if started is None:
                return  # not in flight: nothing to release
            now = self._clock()
            self._active[key.controller] -= 1
            self._observer.worked(key.controller, max(0.0, now - started))
            self._observe_active(key.controller)
            dirty = self._dirty.pop(key, None)
            if dirty is not None and not self._shutting_down:
                self._push_ready(key, dirty, now)
            if self._waiting:
                # The freed slot may unblock a waiting key of any kind.
                self._cond.notify_all()

    def claim(self, key: Key) -> bool:
        """Hold `key` as if handed out, for work done outside the line (a drift check).

        Only when no reconcile of it is waiting or in flight and the per-kind and
        total limits have room: True if held. Delayed adds of the key stay
        scheduled; adds meanwhile make it ready when `release()` is called.
        Neither claim nor release reaches the observer (a drift check is no
        reconcile, and the workqueue metrics count reconciles).
        """
        with self._cond:
            if self._shutting_down or key in self._started or key in self._waiting:
                return False
            if len(self._started) >= self._total_limit:
                return False
            if self._active[key.controller] >= self._limits.get(key.controller, self._total_limit):
                return False
            self._started[key] = self._clock()
            self._active[key.controller] += 1
            self._claimed.add(key)
            self._claims[key.controller] += 1
            return True

    def release(self, key: Key) -> None:
        """End a `claim()`; the key is ready again if it was added meanwhile."""
        with self._cond:
            if key not in self._claimed:
                return
            self._claimed.discard(key)
            self._claims[key.controller] -= 1
            self._started.pop(key, None)
            self._active[key.controller] -= 1
            dirty = self._dirty.pop(key, None)
            if dirty is not None and not self._shutting_down:
                self._push_ready(key, dirty, self._clock())
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Wake every waiter with None; later adds are ignored and get() returns None."""
        with self._cond:
            self._shutting_down = True
            self._timers.clear()
            self._delayed.clear()
            self._cond.notify_all()

    def depth(self, queue: str | None = None) -> int:
        """Keys ready and waiting (not delayed, not in flight), for one kind or all."""
        with self._cond:
            self._promote(self._clock())
            return len(self._waiting) if queue is None else self._depth[queue]

    def in_flight(self, queue: str | None = None) -> int:
        """Keys handed out and not yet done, for one kind or all."""
        with self._cond:
            return len(self._started) if queue is None else self._active[queue]

    def is_pending(self, key: Key) -> bool:
        """True if `key` is waiting or in flight (not merely delayed)."""
        with self._cond:
            return key in self._waiting or key in self._started

    def is_queued(self, key: Key) -> bool:
        """True if `key` is ready and waiting (not delayed, not in flight)."""
        with self._cond:
            self._promote(self._clock())
            return key in self._waiting

    # Internals: call with the lock held.

    def _enqueue(self, key: Key, priority: Priority, now: float) -> bool:
        """Add `key` by the coalescing rules, ready since `now`; True if a new key became ready."""
        if key in self._started:
            previous = self._dirty.get(key)
            if previous is None:
                self._dirty[key] = priority
                self._observer.added(key.controller)
            elif priority > previous:
                self._dirty[key] = priority
            return False
        waiting = self._waiting.get(key)
        if waiting is None:
            self._observer.added(key.controller)
            self._push_ready(key, priority, now)
            return True
        if priority > waiting.priority:
            # Same seq, higher heap: it keeps its place among that priority's keys.
            waiting.priority = priority
            heapq.heappush(self._heap(priority, key.controller), (waiting.seq, key))
        return False

    def _push_ready(self, key: Key, priority: Priority, now: float) -> None:
        seq = next(self._seq)
        self._waiting[key] = _Waiting(priority=priority, seq=seq, since=now)
        heapq.heappush(self._heap(priority, key.controller), (seq, key))
        self._depth[key.controller] += 1
        self._observer.depth(key.controller, self._depth[key.controller])

    def _heap(self, priority: Priority, queue: str) -> list[tuple[int, Key]]:
        return self._ready[priority].setdefault(queue, [])

    def _schedule(self, key: Key, due: float, priority: Priority) -> None:
        pending = self._delayed.get(key)
        if pending is not None and pending.due <= due:
            pending.priority = max(pending.priority, priority)
            return
        if pending is not None:
            priority = max(pending.priority, priority)
        seq = next(self._seq)
        self._delayed[key] = _Delayed(due=due, priority=priority, seq=seq)
        heapq.heappush(self._timers, (due, seq, key))
        if len(self._timers) > 2 * len(self._delayed) + 64:
            # Replaced and handed-out entries stay until their (maybe hours
            # away) time; a CR reconciled often would pile them up. Rebuild.
            self._timers = [(d.due, d.seq, k) for k, d in self._delayed.items()]
            heapq.heapify(self._timers)
        if self._timers[0][1] == seq:
            # Waiters sleep until the earliest timer they knew of; this one is
            # sooner. Wake them all: one woken with a short timeout of its own
            # could give up before it is due and leave the rest asleep.
            self._cond.notify_all()

    def _promote(self, now: float) -> None:
        """Move delayed adds that are due to the line."""
        became_ready = 0
        while self._timers and self._timers[0][0] <= now:
            _, seq, key = heapq.heappop(self._timers)
            pending = self._delayed.get(key)
            if pending is None or pending.seq != seq:
                continue  # replaced by an earlier time, or dropped on hand-out
            del self._delayed[key]
            # Ready since it was due, even if nobody looked until now.
            if self._enqueue(key, pending.priority, pending.due):
                became_ready += 1
        if became_ready:
            self._cond.notify(became_ready)

    def _next_due(self, now: float) -> float | None:
        """Seconds until the next live delayed add, or None if there is none."""
        while self._timers:
            _, seq, key = self._timers[0]
            pending = self._delayed.get(key)
            if pending is not None and pending.seq == seq:
                return max(0.0, pending.due - now)
            heapq.heappop(self._timers)
        return None

    def _take(self, now: float) -> Key | None:
        """Pop the key that may go next under the rules, and mark it in flight."""
        if len(self._started) >= self._total_limit:
            return None
        for priority in _HIGHEST_FIRST:
            best: tuple[int, Key] | None = None
            for queue, heap in self._ready[priority].items():
                if self._active[queue] >= self._limits.get(queue, self._total_limit):
                    continue
                self._drop_stale(priority, heap)
                if heap and (best is None or heap[0][0] < best[0]):
                    best = heap[0]
            if best is not None:
                key = best[1]
                heapq.heappop(self._heap(priority, key.controller))
                self._hand_out(key, now)
                return key
        return None

    def _drop_stale(self, priority: Priority, heap: list[tuple[int, Key]]) -> None:
        while heap:
            seq, key = heap[0]
            waiting = self._waiting.get(key)
            if waiting is not None and waiting.seq == seq and waiting.priority == priority:
                return
            heapq.heappop(heap)

    def _hand_out(self, key: Key, now: float) -> None:
        waiting = self._waiting.pop(key)
        self._depth[key.controller] -= 1
        # The reconcile's outcome schedules the next run; a pending one is moot.
        self._delayed.pop(key, None)
        self._started[key] = now
        self._active[key.controller] += 1
        self._observer.depth(key.controller, self._depth[key.controller])
        self._observer.queued(key.controller, max(0.0, now - waiting.since))
        self._observe_active(key.controller)

    def _observe_active(self, queue: str) -> None:
        # Reconciles only: claims (drift checks) share the limits, not the gauge.
        self._observer.active(queue, self._active[queue] - self._claims[queue])
