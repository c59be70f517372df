"""`FakeRunner`: a scripted `Runner` for testing the layers above the runner.

Where this sits: shipped in the package (like httpx's MockTransport) so the
controller's and reconciler's tests - ours and users' - can stand in for
runner.ansible.AnsibleRunner without Ansible. It records every RunRequest, answers
from a script (results, exceptions or callables, in call order) and can hold runs
until released, to test concurrency, shutdown and cancellation.

    fake = FakeRunner([FakeRunner.failed("boom"), FakeRunner.successful()])
    fake.hold()                       # runs now block ...
    ...; assert fake.wait_running(2)  # ... until two are in progress
    fake.release()                    # let them finish

Script `errors.RunSetupError(...)` for a run that cannot be set up, and
`FakeRunner.timed_out()` for one killed by its timeout. With
kube.fakekube.FakeKube the whole reconcile path runs in memory
(tests/unit/controller/test_reconcile_path.py shows how).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from ansible_operator.runner.base import FailedTask, RunOutcome, RunRequest, RunResult, Stats
from ansible_operator.runner.jobevents import format_completion

__all__ = ["FakeRunner", "Script"]

Script = RunResult | BaseException | Callable[[RunRequest], RunResult]
"""One scripted answer: returned as is (with the request's ident), raised, or called."""


def _stats(**counts: int) -> Stats:
    return Stats(completion=format_completion(datetime.now(UTC)), **counts)


class FakeRunner:
    """A thread-safe Runner answering from a script; see the module docstring."""

    def __init__(
        self,
        script: Iterable[Script] | Callable[[RunRequest], RunResult] = (),
        *,
        default: Script | None = None,
    ) -> None:
        """`script` answers calls in order (or a callable answers every call); once it is
        exhausted `default` answers, and without a default every run succeeds."""
        self._lock = threading.Condition()
        self._every: Callable[[RunRequest], RunResult] | None = None
        self._script: deque[Script] = deque()
        if callable(script):
            self._every = script
        else:
            self._script.extend(script)
        self._default = default
        self._held = False
        self._running = 0
        self.requests: list[RunRequest] = []
        """Every request received, in call order."""
        self.max_concurrent = 0
        """The most runs that were in progress at the same time."""

    # --- scripting helpers -------------------------------------------------------------

    @staticmethod
    def successful(*, requeue_after: float | None = None, ok: int = 1) -> RunResult:
        """A successful result (its ident is replaced by the request's)."""
        return RunResult(
            ident="",
            outcome=RunOutcome.SUCCESSFUL,
            stats=_stats(ok=ok),
            requeue_after=requeue_after,
            rc=0,
        )

    @staticmethod
    def failed(*messages: str, task: str = "task", host: str = "localhost") -> RunResult:
        """A failed result with one FailedTask per message."""
        failures = tuple(
            FailedTask(task=task, action="fail", host=host, message=message)
            for message in messages or ("unknown playbook failure",)
        )
        return RunResult(
            ident="",
            outcome=RunOutcome.FAILED,
            failures=failures,
            stats=_stats(failures=len(failures)),
            rc=2,
        )

    @staticmethod
    def errored(stdout_tail: str = "ERROR! the role 'missing' was not found") -> RunResult:
        """A run that ended without a recap, like a syntax error or a missing role."""
        return RunResult(ident="", outcome=RunOutcome.ERROR, rc=1, stdout_tail=stdout_tail)

    @staticmethod
    def timed_out(after: float = 60.0) -> RunResult:
        """A run killed when its `--ansible-run-timeout` of `after` seconds expired."""
        return RunResult(ident="", outcome=RunOutcome.TIMEOUT, rc=254, duration=after)

    # --- holding runs ------------------------------------------------------------------

    def hold(self) -> None:
        """Make runs block (after being recorded) until `release()` or their cancel Event."""
        with self._lock:
            self._held = True

    def release(self) -> None:
        with self._lock:
            self._held = False
            self._lock.notify_all()

    @property
    def running(self) -> int:
        """How many runs are in progress right now."""
        with self._lock:
            return self._running

    def wait_running(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until at least `count` runs are in progress; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._running >= count, timeout)

    def wait_calls(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until at least `count` runs were requested; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.requests) >= count, timeout)

    # --- the Runner protocol -----------------------------------------------------------

    def run(self, request: RunRequest) -> RunResult:
        with self._lock:
            self.requests.append(request)
            self._running += 1
            self.max_concurrent = max(self.max_concurrent, self._running)
            answer = self._next_answer()
            self._lock.notify_all()
        try:
            if self._wait_while_held(request):
                return RunResult(ident=request.ident, outcome=RunOutcome.CANCELED, rc=254)
            return self._answer(answer, request)
        finally:
            with self._lock:
                self._running -= 1
                self._lock.notify_all()

    def _next_answer(self) -> Script | None:
        if self._every is not None:
            return self._every
        if self._script:
            return self._script.popleft()
        return self._default

    def _wait_while_held(self, request: RunRequest) -> bool:
        """Block while held; True when the request was canceled meanwhile."""
        while True:
            with self._lock:
                if not self._held:
                    return False
                # Short waits: the cancel Event cannot wake this condition.
                self._lock.wait(0.01)
            if request.cancel.is_set():
                return True

    @staticmethod
    def _answer(answer: Script | None, request: RunRequest) -> RunResult:
        if answer is None:
            answer = FakeRunner.successful()
        if isinstance(answer, BaseException):
            raise answer
        result = answer if isinstance(answer, RunResult) else answer(request)
        return dataclasses.replace(result, ident=request.ident)
