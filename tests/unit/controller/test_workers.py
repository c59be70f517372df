"""Unit tests of controller.workers: outcomes, failures, stopping, and a concurrency stress test.

Handlers run in the pool's real threads; the tests wait for them with events
and short polls. Delays run on a fake clock: after moving it, a call such as
`queue.depth()` brings the timer heap up to date and wakes a worker.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.controller.contract import Key, Outcome
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.workers import WorkerPool
from ansible_operator.errors import (
    ApiError,
    BadAnnotation,
    Conflict,
    InvalidResource,
    KubeUnavailable,
    NotFound,
    Permanent,
    RetryLater,
    RunSetupError,
)
from tests.unit.controller.test_queue import A, B, C, Recorder, key

LOGGER = "ansible_operator.controller.workers"
Pools = Callable[..., WorkerPool]


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the workers"
        time.sleep(0.001)


@pytest.fixture
def pools() -> Iterator[Pools]:
    """Builds pools and stops whatever is left of them after the test."""
    made: list[WorkerPool] = []

    def build(queue: WorkQueue, handler: Callable[[Key], Outcome], **options: object) -> WorkerPool:
        pool = WorkerPool(queue, handler, **options)  # type: ignore[arg-type]
        made.append(pool)
        return pool

    yield build
    for pool in made:
        assert pool.stop(grace=5.0)


class Calls:
    """A handler that returns scripted outcomes and counts its calls."""

    def __init__(self, *outcomes: Outcome | Exception) -> None:
        self._script = list(outcomes)
        self._lock = threading.Lock()
        self.keys: list[Key] = []

    def __call__(self, key: Key) -> Outcome:
        with self._lock:
            self.keys.append(key)
            step = self._script.pop(0) if self._script else Outcome()
        if isinstance(step, Exception):
            raise step
        return step

    def count(self) -> int:
        with self._lock:
            return len(self.keys)


def make(clock: FakeClock, **options: object) -> WorkQueue:
    settings: dict[str, object] = {"total_limit": 10, "backoff_base": 1.0, "backoff_max": 8.0}
    settings.update(options)
    return WorkQueue(clock=clock, **settings)  # type: ignore[arg-type]


def tick(queue: WorkQueue, clock: FakeClock, seconds: float) -> None:
    """Move the fake clock, then let the queue notice (a blocked worker waits in real time)."""
    clock.advance(seconds)
    queue.depth()


def settle(queue: WorkQueue) -> None:
    """Wait until nothing is in flight or ready (delayed adds may remain)."""
    wait_until(lambda: queue.in_flight() == 0 and queue.depth() == 0)


# -- applying outcomes -------------------------------------------------------


def test_handler_exception_is_logged_retried_with_backoff_then_forgotten(
    pools: Pools, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    queue = make(clock)
    handler = Calls(RuntimeError("boom"), RuntimeError("boom again"), Outcome())
    pools(queue, handler, workers=2)
    x = key("memcached-sample")
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        queue.add(x)
        wait_until(lambda: handler.count() == 1)
        settle(queue)
    assert queue.failures(x) == 1
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert "memcached-sample" in record.getMessage()
    assert record.exc_info is not None
    tick(queue, clock, 0.5)  # first backoff is 0.9-1.0 s
    settle(queue)
    assert handler.count() == 1
    tick(queue, clock, 0.5)
    wait_until(lambda: handler.count() == 2)
    settle(queue)
    assert queue.failures(x) == 2
    tick(queue, clock, 1.0)  # second backoff is 1.8-2.0 s
    settle(queue)
    assert handler.count() == 2
    tick(queue, clock, 1.0)
    wait_until(lambda: handler.count() == 3)
    settle(queue)
    assert queue.failures(x) == 0  # success forgets the failures
    tick(queue, clock, 1000.0)
    settle(queue)
    assert handler.count() == 3


def test_error_outcome_backs_off_and_ignores_requeue_after(pools: Pools) -> None:
    clock = FakeClock()
    seen = Recorder()
    queue = make(clock, observer=seen)
    handler = Calls(Outcome(error=RuntimeError("failed task"), requeue_after=0.1))
    pools(queue, handler, workers=1)
    queue.add(key("x"))
    wait_until(lambda: handler.count() == 1)
    settle(queue)
    assert queue.failures(key("x")) == 1
    assert seen.of("retried") == [(A, None)]
    tick(queue, clock, 0.5)
    settle(queue)
    assert handler.count() == 1
    tick(queue, clock, 0.5)
    wait_until(lambda: handler.count() == 2)


# (case, what the handler does, quiet for, then due after, failures counted):
# every error class of errors.py, returned as the reconciler returns it or raised.
ERROR_CLASSES = [
    (
        "permanent returned as terminal: reported, back only at its period",
        Outcome(terminal=Permanent("no inventory"), requeue_after=30.0),
        29.9,
        0.1,
        0,
    ),
    (
        "terminal without a period: never",
        Outcome(terminal=Permanent("x")),
        10_000,
        None,
        0,
    ),
    ("run set-up error terminal", Outcome(terminal=RunSetupError("x")), 10_000, None, 0),
    ("invalid resource terminal", Outcome(terminal=InvalidResource("x")), 10_000, None, 0),
    (
        "retry later with a delay: that delay",
        Outcome(error=RetryLater("x", delay=7.0)),
        6.9,
        0.1,
        1,
    ),
    ("retry later without a delay: backoff", Outcome(error=RetryLater("x")), 0.85, 0.15, 1),
    ("api unavailable returned: backoff", Outcome(error=KubeUnavailable("x")), 0.85, 0.15, 1),
    ("permanent raised, so not reported: backoff", Permanent("HTTP 403"), 0.85, 0.15, 1),
    ("retry later raised with a delay: that delay", RetryLater("x", delay=5.0), 4.9, 0.1, 1),
    ("api unavailable raised: backoff", KubeUnavailable("x"), 0.85, 0.15, 1),
    ("api error raised (a 403): backoff", ApiError(403, "forbidden"), 0.85, 0.15, 1),
    ("conflict raised: backoff", Conflict(409, "changed"), 0.85, 0.15, 1),
    ("not found raised: backoff", NotFound(404, "gone"), 0.85, 0.15, 1),
    ("bad annotation raised: backoff", BadAnnotation("x"), 0.85, 0.15, 1),
    ("a bug raised: backoff", KeyError("x"), 0.85, 0.15, 1),
]


@pytest.mark.parametrize(
    ("step", "quiet", "due", "failures"),
    [case[1:] for case in ERROR_CLASSES],
    ids=[case[0] for case in ERROR_CLASSES],
)
def test_error_classes_decide_when_the_key_comes_back(
    pools: Pools,
    step: Outcome | Exception,
    quiet: float,
    due: float | None,
    failures: int,
) -> None:
    clock = FakeClock()
    queue = make(clock, backoff_max=1000.0)
    handler = Calls(step)
    pools(queue, handler, workers=1)
    queue.add(key("x"))
    wait_until(lambda: handler.count() == 1)
    settle(queue)
    assert queue.failures(key("x")) == failures
    tick(queue, clock, quiet)
    settle(queue)
    assert handler.count() == 1
    if due is None:
        return
    tick(queue, clock, due)
    wait_until(lambda: handler.count() == 2)


def test_worker_survives_exceptions(pools: Pools) -> None:
    clock = FakeClock()
    queue = make(clock)
    handler = Calls(ValueError("1"), ValueError("2"), ValueError("3"))
    pools(queue, handler, workers=1)
    for name in ("a", "b", "c", "d"):
        queue.add(key(name))
    wait_until(lambda: handler.count() == 4)
    settle(queue)
    assert [queue.failures(key(name)) for name in "abcd"] == [1, 1, 1, 0]


def test_requeue_after_schedules_a_resync(pools: Pools) -> None:
    clock = FakeClock()
    queue = make(clock)
    handler = Calls(Outcome(requeue_after=30.0), Outcome(requeue_after=30.0))
    pools(queue, handler, workers=2)
    queue.add(key("x"))
    wait_until(lambda: handler.count() == 1)
    settle(queue)
    tick(queue, clock, 29.0)
    settle(queue)
    assert handler.count() == 1
    tick(queue, clock, 1.0)
    wait_until(lambda: handler.count() == 2)


@pytest.mark.parametrize(
    "outcome",
    [Outcome(), Outcome(requeue_after=0.0), Outcome(forget=True, requeue_after=5.0)],
    ids=["no-period", "zero-period", "forget"],
)
def test_no_requeue_without_a_period_or_after_forget(pools: Pools, outcome: Outcome) -> None:
    clock = FakeClock()
    queue = make(clock)
    handler = Calls(Outcome(error=RuntimeError("x")), outcome)
    pools(queue, handler, workers=1)
    queue.add(key("x"))
    wait_until(lambda: handler.count() == 1)
    settle(queue)
    tick(queue, clock, 1.0)
    wait_until(lambda: handler.count() == 2)
    settle(queue)
    assert queue.failures(key("x")) == 0
    tick(queue, clock, 10_000.0)
    settle(queue)
    assert handler.count() == 2


def test_busy_counts_running_handlers_and_observer_sees_the_work(pools: Pools) -> None:
    clock = FakeClock()
    seen = Recorder()
    queue = make(clock, observer=seen)
    release = threading.Event()
    running = threading.Semaphore(0)

    def handler(_: Key) -> Outcome:
        running.release()
        release.wait(5)
        return Outcome()

    pool = pools(queue, handler, workers=4)
    queue.set_limit(A, 2)
    for name in ("a1", "a2", "a3"):
        queue.add(key(name, queue=A))
    queue.add(key("b1", queue=B))
    for _ in range(3):
        assert running.acquire(timeout=5)
    assert pool.busy() == 3
    assert queue.in_flight(A) == 2
    assert queue.in_flight(B) == 1
    assert queue.depth(A) == 1
    tick(queue, clock, 2.0)
    release.set()
    assert running.acquire(timeout=5)  # a3, once an A slot was free
    settle(queue)
    assert pool.busy() == 0
    assert len(seen.of("added")) == 4
    # a1, a2 and b1 ran while the clock moved 2 s; a3 started after that.
    assert sorted(seen.of("worked")) == [(A, 0.0), (A, 2.0), (A, 2.0), (B, 2.0)]
    assert max(value or 0 for queue_, value in seen.of("active") if queue_ == A) == 2
    assert seen.of("active")[-1][1] == 0


def test_a_key_is_never_run_by_two_workers(pools: Pools) -> None:
    queue = make(FakeClock())
    release = threading.Event()
    x_running = threading.Event()
    started: list[str] = []  # handler entries, in order

    def handler(k: Key) -> Outcome:
        started.append(k.name)
        if k.name == "x":
            x_running.set()
            release.wait(5)
        return Outcome()

    pools(queue, handler, workers=8)
    queue.add(key("x"))
    assert x_running.wait(5)
    for _ in range(5):
        queue.add(key("x"))
    # y is behind the re-adds of x; seven idle workers would have taken x first.
    queue.add(key("y"))
    wait_until(lambda: "y" in started and queue.in_flight() == 1)
    assert started == ["x", "y"]
    assert queue.depth() == 0  # x waits as dirty, not in the line
    release.set()
    wait_until(lambda: len(started) == 3)
    settle(queue)
    assert started == ["x", "y", "x"]  # the five re-adds make one more run


# -- stopping ----------------------------------------------------------------


class Blocking:
    """A handler that blocks until released, like a long Ansible run."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def __call__(self, _: Key) -> Outcome:
        self.started.set()
        self.release.wait(10)
        self.finished.set()
        return Outcome(requeue_after=1.0)


def test_stop_lets_a_running_handler_finish_within_grace(
    pools: Pools, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = make(FakeClock())
    handler = Blocking()
    pool = pools(queue, handler, workers=2)
    shut = threading.Event()
    original = queue.shutdown

    def shutdown() -> None:
        original()
        shut.set()

    monkeypatch.setattr(queue, "shutdown", shutdown)
    queue.add(key("x"))
    assert handler.started.wait(5)
    cancelled: list[bool] = []
    result: list[bool] = []
    stopper = threading.Thread(
        target=lambda: result.append(pool.stop(grace=10.0, cancel=lambda: cancelled.append(True)))
    )
    stopper.start()
    assert shut.wait(5)
    queue.add(key("late"))  # no new work once stopping
    assert not queue.is_queued(key("late"))
    assert pool.busy() == 1
    handler.release.set()
    stopper.join(5)
    assert result == [True]
    assert cancelled == []
    assert handler.finished.is_set()
    assert pool.busy() == 0


def test_stop_past_grace_calls_cancel(pools: Pools) -> None:
    queue = make(FakeClock())
    handler = Blocking()
    pool = pools(queue, handler, workers=1)
    queue.add(key("x"))
    assert handler.started.wait(5)
    started = time.monotonic()
    assert pool.stop(grace=0.05, cancel=handler.release.set)
    assert time.monotonic() - started >= 0.05
    assert handler.finished.is_set()


def test_stop_reports_workers_that_do_not_end(
    pools: Pools, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make(FakeClock())
    handler = Blocking()
    pool = pools(queue, handler, workers=1)
    queue.add(key("x"))
    assert handler.started.wait(5)

    def broken_cancel() -> None:
        raise OSError("no such process")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert not pool.stop(grace=0.01)
        assert not pool.stop(grace=0.01, cancel=broken_cancel, after_cancel=0.01)
    assert any("Cancelling" in r.getMessage() and r.exc_info for r in caplog.records)
    handler.release.set()  # the fixture's final stop() then succeeds


def test_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerPool(make(FakeClock()), Calls(), workers=0)


# -- stress ------------------------------------------------------------------


class Tracker:
    """A handler that checks the limits from the inside and records what it saw."""

    def __init__(self, slow: set[Key]) -> None:
        self.slow = slow  # hot keys run longer, so re-adds reach the head while they run
        self.lock = threading.Lock()
        self.version: Counter[Key] = Counter()  # bumped before every add
        self.seen: dict[Key, int] = {}  # version read by the last successful run
        self.active: set[Key] = set()
        self.per_kind: Counter[str] = Counter()
        self.max_per_kind: Counter[str] = Counter()
        self.max_total = 0
        self.violations: list[str] = []
        self.runs = 0

    def __call__(self, key: Key) -> Outcome:
        with self.lock:
            if key in self.active:
                self.violations.append(f"{key} twice at once")
            self.active.add(key)
            self.per_kind[key.controller] += 1
            self.max_per_kind[key.controller] = max(
                self.max_per_kind[key.controller], self.per_kind[key.controller]
            )
            self.max_total = max(self.max_total, len(self.active))
            version = self.version[key]
            self.runs += 1
        time.sleep(0.003 if key in self.slow else random.random() * 0.0005)
        failed = random.random() < 0.1
        with self.lock:
            self.active.discard(key)
            self.per_kind[key.controller] -= 1
            if not failed:
                self.seen[key] = version
        return Outcome(error=RuntimeError("flaky")) if failed else Outcome()

    def caught_up(self) -> bool:
        with self.lock:
            return all(self.seen.get(k) == v for k, v in self.version.items())


def test_stress_limits_and_one_reconcile_per_key(pools: Pools) -> None:
    limits = {A: 2, B: 3, C: 1}
    total = 4
    queue = WorkQueue(total_limit=total, backoff_base=0.001, backoff_max=0.01)
    for kind, limit in limits.items():
        queue.set_limit(kind, limit)
    keys = [key(f"cr{i}", queue=(A, B, C)[i % 3]) for i in range(200)]
    hot = keys[:12]
    tracker = Tracker(set(hot))
    pool = pools(queue, tracker, workers=8)

    def adder(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            # Half the adds hit the hot keys, so they often land mid-reconcile.
            k = rng.choice(hot if rng.random() < 0.5 else keys)
            with tracker.lock:
                tracker.version[k] += 1
            if rng.random() < 0.2:
                queue.add_after(k, rng.random() * 0.002, priority=Priority.RESYNC)
            else:
                queue.add(k, priority=rng.choice(list(Priority)))
            if rng.random() < 0.1:
                time.sleep(0.001)  # let the line run short, so re-adds meet keys in flight

    adders = [threading.Thread(target=adder, args=(seed,)) for seed in range(4)]
    for thread in adders:
        thread.start()
    for thread in adders:
        thread.join(30)
    # Level-triggered: every key's last add is seen by a later successful run.
    wait_until(tracker.caught_up, timeout=60)
    assert pool.stop(grace=5.0)
    assert tracker.violations == []
    assert tracker.max_total <= total
    assert all(tracker.max_per_kind[kind] <= limit for kind, limit in limits.items())
    assert tracker.max_total >= 2  # the workers did overlap
    assert tracker.runs >= len(keys)
    assert queue.in_flight() == 0
