"""Clocks: the time every timed decision of the operator reads, and a fake one for tests.

A bottom layer, next to errors: it imports nothing of the package, so any
layer may take a clock. Code that waits, expires or judges a deadline takes a
clock as a constructor argument and defaults to the real one; tests pass a
`FakeClock` and move it by hand, so they need neither sleeps nor a cluster.
Shipped in the package (as kube.fakekube.FakeKube and runner.fakerunner.FakeRunner are)
so that users' tests of code built on these classes can do the same.

Two readings, as Go's time.Time carries both:

* `monotonic()` seconds, for durations and deadlines (lease expiry, backoff,
  queue delays): it never jumps when the system clock is set;
* `wall()`, an aware UTC datetime, for what is written into objects for
  people and other processes to read (a Lease's renewTime, timestamps).

Users: controller.leader and controller.sharding (membership, group Lease)
take a `Clock`; controller.queue, controller.drift and the Event recorder take
only the monotonic reading as a `Callable[[], float]`, which a `FakeClock`
also is (calling it reads `monotonic()`).
"""

from __future__ import annotations

import datetime
import time
from typing import Protocol

__all__ = ["SYSTEM", "Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """Where a component reads the time; `SYSTEM` in the operator, a `FakeClock` in tests."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: for durations."""
        ...

    def wall(self) -> datetime.datetime:
        """The current date and time in UTC: for timestamps written into objects."""
        ...


class SystemClock:
    """The real clocks: time.monotonic and the system's UTC time."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)


SYSTEM = SystemClock()

_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class FakeClock:
    """A clock that moves only when told to; both readings move together.

    `now` is the monotonic reading (tests may set it directly); the wall
    reading is `start` plus the time advanced since construction. Calling the
    clock reads `monotonic()`, so it also fits parameters typed
    `Callable[[], float]` (controller.queue.WorkQueue, controller.drift).
    Not thread-safe beyond what a float assignment is: tests move it from
    one thread.
    """

    def __init__(self, now: float = 1000.0, *, start: datetime.datetime = _EPOCH) -> None:
        self.now = now
        self._origin = now
        self._start = start

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime.datetime:
        return self._start + datetime.timedelta(seconds=self.now - self._origin)

    def advance(self, seconds: float) -> None:
        self.now += seconds
