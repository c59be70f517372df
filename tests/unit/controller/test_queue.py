"""Unit tests of controller.queue: coalescing, priorities, limits, delays, backoff, shutdown.

Time is a fake clock the tests move by hand; `get(timeout=0)` polls without
blocking. Only the tests of blocking get() use real threads, with short waits
for the hand-off.
"""

from __future__ import annotations

import threading
import time

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.controller.contract import Key
from ansible_operator.controller.queue import Priority, WorkQueue

A = "a-v1-controller"
B = "b-v1-controller"
C = "c-v1-controller"


class Recorder:
    """A QueueObserver that writes down every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float | None]] = []
        self._lock = threading.Lock()

    def _note(self, what: str, queue: str, value: float | None = None) -> None:
        with self._lock:
            self.calls.append((what, queue, value))

    def added(self, queue: str) -> None:
        self._note("added", queue)

    def depth(self, queue: str, items: int) -> None:
        self._note("depth", queue, items)

    def queued(self, queue: str, seconds: float) -> None:
        self._note("queued", queue, seconds)

    def worked(self, queue: str, seconds: float) -> None:
        self._note("worked", queue, seconds)

    def retried(self, queue: str) -> None:
        self._note("retried", queue)

    def active(self, queue: str, workers: int) -> None:
        self._note("active", queue, workers)

    def of(self, what: str) -> list[tuple[str, float | None]]:
        with self._lock:
            return [(queue, value) for name, queue, value in self.calls if name == what]


def key(name: str, queue: str = A, namespace: str = "ns") -> Key:
    return Key(controller=queue, namespace=namespace, name=name)


def make(
    clock: FakeClock | None = None,
    *,
    total_limit: int = 100,
    base: float = 1.0,
    cap: float = 60.0,
    observer: Recorder | None = None,
) -> WorkQueue:
    return WorkQueue(
        total_limit=total_limit,
        backoff_base=base,
        backoff_max=cap,
        observer=observer,
        clock=clock if clock is not None else FakeClock(),
    )


def drain(queue: WorkQueue, *, finish: bool = True) -> list[str]:
    """Names handed out by polling until nothing more may go."""
    names = []
    while (got := queue.get(timeout=0)) is not None:
        names.append(got.name)
        if finish:
            queue.done(got)
    return names


# -- coalescing and dirty keys ----------------------------------------------


def test_three_adds_of_one_key_make_one_item() -> None:
    queue = make()
    for _ in range(3):
        queue.add(key("x"))
    assert queue.depth() == 1
    assert queue.is_queued(key("x"))
    assert drain(queue) == ["x"]
    assert queue.depth() == 0


def test_readding_a_waiting_key_keeps_its_place() -> None:
    queue = make()
    for name in ("a", "b", "a", "c", "a"):
        queue.add(key(name))
    assert drain(queue) == ["a", "b", "c"]


def test_priority_upgrade_keeps_the_first_add_position() -> None:
    queue = make()
    queue.add(key("old"), priority=Priority.RESYNC)
    queue.add(key("new1"))
    queue.add(key("new2"))
    queue.add(key("old"))  # a CHANGE for a key waiting since before new1
    assert queue.depth() == 1 + 2
    assert drain(queue) == ["old", "new1", "new2"]


def test_lower_priority_readd_does_not_downgrade() -> None:
    queue = make()
    queue.add(key("resync"), priority=Priority.RESYNC)
    queue.add(key("x"))
    queue.add(key("y"))
    queue.add(key("x"), priority=Priority.RESYNC)
    queue.add(key("x"), priority=Priority.RETRY)
    assert drain(queue) == ["x", "y", "resync"]


def test_add_during_processing_requeues_once_on_done() -> None:
    queue = make()
    queue.add(key("x"))
    got = queue.get(timeout=0)
    assert got == key("x")
    for _ in range(3):
        queue.add(key("x"))
    # Not waiting and not handed out again while in flight.
    assert queue.depth() == 0
    assert not queue.is_queued(key("x"))
    assert queue.get(timeout=0) is None
    queue.done(got)
    assert queue.depth() == 1
    again = queue.get(timeout=0)
    assert again == key("x")
    queue.done(again)
    assert queue.depth() == 0
    assert queue.get(timeout=0) is None


def test_dirty_key_comes_back_with_the_highest_priority_asked() -> None:
    queue = make()
    queue.add(key("x"))
    got = queue.get(timeout=0)
    assert got is not None
    queue.add(key("x"), priority=Priority.RESYNC)
    queue.add(key("x"), priority=Priority.CHANGE)
    queue.add(key("x"), priority=Priority.RETRY)
    queue.add(key("waiting"), priority=Priority.RETRY)
    queue.done(got)
    assert drain(queue) == ["x", "waiting"]


def test_done_of_a_key_not_in_flight_is_ignored() -> None:
    queue = make()
    queue.add(key("x"))
    queue.done(key("x"))
    assert queue.in_flight() == 0
    assert drain(queue) == ["x"]


def test_one_key_is_never_handed_to_two_waiting_getters() -> None:
    queue = make(clock=None)
    queue.add(key("x"))
    first = queue.get(timeout=0)
    assert first == key("x")
    results: list[Key | None] = []
    getters = [
        threading.Thread(target=lambda: results.append(queue.get(timeout=0.2))) for _ in range(4)
    ]
    for thread in getters:
        thread.start()
    queue.add(key("x"))
    for thread in getters:
        thread.join(5)
    assert results == [None] * 4
    queue.done(first)
    assert queue.get(timeout=0) == key("x")


# -- priorities and limits ---------------------------------------------------


def test_change_then_retry_then_resync_fifo_within_each() -> None:
    queue = make()
    queue.add(key("resync1"), priority=Priority.RESYNC)
    queue.add(key("retry1"), priority=Priority.RETRY)
    queue.add(key("change1"), priority=Priority.CHANGE)
    queue.add(key("resync2"), priority=Priority.RESYNC)
    queue.add(key("retry2"), priority=Priority.RETRY)
    queue.add(key("change2", queue=B), priority=Priority.CHANGE)
    assert drain(queue) == ["change1", "change2", "retry1", "retry2", "resync1", "resync2"]


def test_new_cr_goes_ahead_of_a_resync_backlog() -> None:
    queue = make(total_limit=2)
    for index in range(50):
        queue.add(key(f"old{index}"), priority=Priority.RESYNC)
    running = [queue.get(timeout=0), queue.get(timeout=0)]
    queue.add(key("new"))
    assert queue.get(timeout=0) is None  # total limit reached
    first = running[0]
    assert first is not None
    queue.done(first)
    assert queue.get(timeout=0) == key("new")


def test_per_kind_limit_lets_other_kinds_flow() -> None:
    queue = make()
    queue.set_limit(A, 1)
    for index in range(5):
        queue.add(key(f"a{index}", queue=A))
    queue.add(key("b0", queue=B))
    queue.add(key("b1", queue=B))
    a0 = queue.get(timeout=0)
    assert a0 == key("a0", queue=A)
    assert queue.get(timeout=0) == key("b0", queue=B)
    assert queue.get(timeout=0) == key("b1", queue=B)
    assert queue.get(timeout=0) is None
    assert queue.in_flight(A) == 1
    assert queue.in_flight(B) == 2
    assert queue.depth(A) == 4
    queue.done(a0)
    assert queue.get(timeout=0) == key("a1", queue=A)
    assert queue.get(timeout=0) is None


def test_blocked_kind_is_skipped_even_for_a_lower_priority_item() -> None:
    queue = make()
    queue.set_limit(A, 1)
    queue.add(key("a0", queue=A))
    queue.add(key("a1", queue=A))
    queue.add(key("b-resync", queue=B), priority=Priority.RESYNC)
    assert queue.get(timeout=0) == key("a0", queue=A)
    assert queue.get(timeout=0) == key("b-resync", queue=B)


def test_total_limit_caps_in_flight_across_kinds() -> None:
    queue = make(total_limit=2)
    for kind in (A, B, C):
        queue.add(key("x", queue=kind))
    first = queue.get(timeout=0)
    second = queue.get(timeout=0)
    assert first is not None
    assert second is not None
    assert queue.get(timeout=0) is None
    assert queue.in_flight() == 2
    queue.done(second)
    assert queue.get(timeout=0) == key("x", queue=C)


def test_limits_below_one_are_coerced_to_one() -> None:
    queue = make(total_limit=0)
    queue.set_limit(A, 0)
    queue.add(key("a0", queue=A))
    queue.add(key("a1", queue=A))
    queue.add(key("b0", queue=B))
    assert queue.get(timeout=0) == key("a0", queue=A)
    assert queue.get(timeout=0) is None


def test_raising_a_limit_wakes_a_blocked_getter() -> None:
    queue = make(clock=None)
    queue.set_limit(A, 1)
    queue.add(key("a0", queue=A))
    queue.add(key("a1", queue=A))
    assert queue.get(timeout=0) == key("a0", queue=A)
    got: list[Key | None] = []
    getter = threading.Thread(target=lambda: got.append(queue.get(timeout=5)))
    getter.start()
    queue.set_limit(A, 2)
    getter.join(5)
    assert got == [key("a1", queue=A)]


# -- delayed adds ------------------------------------------------------------


def test_add_after_becomes_ready_at_its_time() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add_after(key("x"), 10.0)
    assert queue.depth() == 0
    clock.advance(9.99)
    assert queue.get(timeout=0) is None
    clock.advance(0.01)
    assert queue.is_queued(key("x"))
    assert queue.get(timeout=0) == key("x")


def test_add_after_zero_delay_is_an_immediate_add() -> None:
    queue = make()
    queue.add_after(key("x"), 0.0)
    assert queue.is_queued(key("x"))


def test_delayed_add_keeps_its_priority() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add_after(key("resync"), 5.0)
    queue.add_after(key("retry"), 5.0, priority=Priority.RETRY)
    clock.advance(5.0)
    queue.add(key("change"))
    assert drain(queue) == ["change", "retry", "resync"]


def test_earlier_add_after_wins() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add_after(key("x"), 10.0)
    queue.add_after(key("x"), 5.0)
    queue.add_after(key("y"), 5.0)
    queue.add_after(key("y"), 10.0)  # later: ignored
    clock.advance(5.0)
    assert drain(queue) == ["x", "y"]
    clock.advance(5.0)
    # The 10 s add of x was replaced, the one of y never taken.
    assert drain(queue) == []


def test_handing_out_a_key_drops_its_pending_delayed_add() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add_after(key("x"), 10.0)
    queue.add(key("x"))
    assert drain(queue) == ["x"]
    clock.advance(60.0)
    assert drain(queue) == []


def test_delayed_add_scheduled_while_in_flight_survives() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add(key("x"))
    got = queue.get(timeout=0)
    assert got is not None
    queue.add_after(key("x"), 30.0)  # what a worker does with requeue_after
    queue.done(got)
    clock.advance(30.0)
    assert drain(queue) == ["x"]


def test_delayed_add_due_while_in_flight_marks_dirty() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add(key("x"))
    got = queue.get(timeout=0)
    assert got is not None
    queue.add_after(key("x"), 1.0)
    clock.advance(1.0)
    assert queue.get(timeout=0) is None
    queue.done(got)
    assert drain(queue) == ["x"]


def test_dropped_delayed_adds_do_not_pile_up() -> None:
    clock = FakeClock()
    queue = make(clock)
    queue.add_after(key("other"), 7200.0)
    for _ in range(1000):
        # A CR changed every second: each run schedules a resync an hour out,
        # the next change hands it out and drops that resync.
        queue.add(key("x"))
        got = queue.get(timeout=0)
        assert got == key("x")
        queue.add_after(got, 3600.0)
        queue.done(got)
        clock.advance(1.0)
    assert len(queue._timers) < 200  # white-box: the heap was rebuilt on the way
    clock.advance(3600.0 - 1.0)
    assert drain(queue) == ["x"]  # only the last run's resync is live
    clock.advance(7200.0)
    assert drain(queue) == ["other"]


# -- backoff -----------------------------------------------------------------


def test_backoff_doubles_up_to_the_cap_and_forget_resets_it() -> None:
    queue = make(base=1.0, cap=8.0)
    x = key("x")
    delays = [queue.add_rate_limited(x) for _ in range(6)]
    for delay, nominal in zip(delays, [1.0, 2.0, 4.0, 8.0, 8.0, 8.0], strict=True):
        assert nominal * 0.9 <= delay <= nominal  # jitter only shortens
    assert queue.failures(x) == 6
    queue.forget(x)
    assert queue.failures(x) == 0
    assert 0.9 <= queue.add_rate_limited(x) <= 1.0
    assert queue.failures(key("other")) == 0


def test_backoff_survives_very_many_failures() -> None:
    queue = make(base=0.005, cap=1000.0)
    for _ in range(3000):
        delay = queue.add_rate_limited(key("x"))
    assert 900.0 <= delay <= 1000.0


def test_rate_limited_key_is_ready_at_its_delay_with_retry_priority() -> None:
    clock = FakeClock()
    queue = make(clock, base=2.0, cap=2.0)
    start = clock.now
    delay = queue.add_rate_limited(key("x"))
    queue.add_after(key("resync"), delay)
    clock.now = start + delay - 0.001
    assert queue.depth() == 0
    clock.now = start + delay
    assert drain(queue) == ["x", "resync"]


def test_a_delay_asked_for_replaces_the_backoff_and_still_counts_as_a_failure() -> None:
    clock = FakeClock()
    queue = make(clock, base=1.0, cap=60.0)
    x = key("x")
    start = clock.now
    assert queue.add_rate_limited(x, delay=7.0) == 7.0  # exactly: no jitter, no backoff
    assert queue.failures(x) == 1
    clock.now = start + 6.999
    assert queue.depth() == 0
    clock.now = start + 7.0
    assert drain(queue) == ["x"]
    assert 1.8 <= queue.add_rate_limited(x) <= 2.0  # the second failure's backoff
    assert queue.add_rate_limited(x, delay=-1.0) == 0.0


def test_bad_backoff_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="backoff"):
        make(base=0.0)
    with pytest.raises(ValueError, match="backoff"):
        make(base=2.0, cap=1.0)


# -- blocking get and shutdown -------------------------------------------------


def test_blocked_getter_wakes_on_add_from_another_thread() -> None:
    queue = make(clock=None)
    got: list[Key | None] = []
    getter = threading.Thread(target=lambda: got.append(queue.get()))
    getter.start()
    queue.add(key("x"))
    getter.join(5)
    assert got == [key("x")]


def test_blocked_getter_wakes_when_a_delayed_add_is_due() -> None:
    queue = WorkQueue(total_limit=4, backoff_base=1.0, backoff_max=1.0)  # the real clock
    got: list[Key | None] = []
    getter = threading.Thread(target=lambda: got.append(queue.get()))
    getter.start()
    started = time.monotonic()
    queue.add_after(key("x"), 0.05)
    getter.join(5)
    assert got == [key("x")]
    assert time.monotonic() - started >= 0.05


def test_get_times_out_with_none() -> None:
    queue = make()
    started = time.monotonic()
    assert queue.get(timeout=0.02) is None
    assert time.monotonic() - started >= 0.02


def test_shutdown_wakes_every_blocked_getter() -> None:
    queue = make()
    got: list[Key | None] = []
    getters = [threading.Thread(target=lambda: got.append(queue.get())) for _ in range(3)]
    for thread in getters:
        thread.start()
    queue.shutdown()
    for thread in getters:
        thread.join(5)
    assert not any(thread.is_alive() for thread in getters)
    assert got == [None, None, None]


def test_after_shutdown_adds_are_ignored_and_get_returns_none() -> None:
    queue = make()
    queue.add(key("x"))
    got = queue.get(timeout=0)
    assert got is not None
    queue.add(key("waiting"))
    queue.shutdown()
    queue.add(key("y"))
    queue.add_after(key("z"), 1.0)
    queue.add(key("x"))
    assert queue.get(timeout=0) is None
    assert queue.get() is None  # does not block
    queue.done(got)
    assert queue.in_flight() == 0
    assert not queue.is_queued(key("x"))
    assert not queue.is_queued(key("y"))


# -- observer ----------------------------------------------------------------


def test_observer_sees_adds_depth_waits_work_and_retries() -> None:
    clock = FakeClock()
    seen = Recorder()
    queue = make(clock, observer=seen)
    queue.add(key("x"))
    queue.add(key("x"))  # coalesced: not a new add
    queue.add(key("b", queue=B))
    clock.advance(2.0)
    got = queue.get(timeout=0)
    assert got == key("x")
    queue.add(key("x"))  # dirty: counted once
    queue.add(key("x"))
    clock.advance(3.0)
    queue.add_rate_limited(got)
    queue.done(got)
    # The dirty add counts once; putting it back on done() is not another add.
    assert seen.of("added") == [(A, None), (B, None), (A, None)]
    assert seen.of("depth") == [(A, 1), (B, 1), (A, 0), (A, 1)]
    assert seen.of("queued") == [(A, 2.0)]
    assert seen.of("active") == [(A, 1), (A, 0)]
    assert seen.of("worked") == [(A, 3.0)]
    assert seen.of("retried") == [(A, None)]
