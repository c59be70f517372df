"""End each ansible-runner run as soon as its process has exited, not 0.1 s later.

Where this sits: runner/ansible.py calls `install()` before each run (after the first,
a check of a mark); ptyprocess is imported then too, with ansible-runner, not at start-up.
ansible-runner drives `ansible-playbook` through pexpect; at the end of every run it
reads to EOF and calls `child.close()`, and ptyprocess's `PtyProcess.close` then
sleeps a fixed `delayafterclose` (0.1 s) "to give the kernel time to update the
process status" before it reaps the child. At EOF the child is exiting already, so
that sleep is pure latency: 0.1 s of every reconcile, an eighth of a warm one.

The wrapper installed here waits for the child's exit by polling (`waitid` with
WNOWAIT, so ptyprocess still reaps it and reads the exit status itself) for at most
the same `delayafterclose`, and lets the original `close` run without its sleep. A
child that has not exited by then is handled exactly as before (terminated). If
ptyprocess changes shape (no `close`, no `delayafterclose`), nothing is patched and
runs keep the upstream behaviour.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["child_has_exited", "install"]

log = logging.getLogger(__name__)

_POLL = 0.002  # seconds between two exit checks; a reap costs one syscall
_MARK = "__ao_ptyreap__"
_lock = threading.Lock()


def child_has_exited(pid: int) -> bool:
    """True once `pid` (our child) has exited; it stays reapable (WNOWAIT)."""
    try:
        status = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # reaped already: nothing left to wait for
    return status is not None


def _wait_for_exit(pid: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not child_has_exited(pid) and time.monotonic() < deadline:
        time.sleep(_POLL)


def _wrap(close: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(close)
    def close_without_fixed_sleep(self: Any, *args: Any, **kwargs: Any) -> Any:
        delay = getattr(self, "delayafterclose", None)
        pid = getattr(self, "pid", None)
        if getattr(self, "closed", True) or not isinstance(delay, int | float) or not pid:
            return close(self, *args, **kwargs)
        _wait_for_exit(pid, float(delay))
        self.delayafterclose = 0
        try:
            return close(self, *args, **kwargs)
        finally:
            self.delayafterclose = delay

    setattr(close_without_fixed_sleep, _MARK, True)
    return close_without_fixed_sleep


def install() -> bool:
    """Patch `ptyprocess.PtyProcess.close` once per process; False when it cannot be."""
    # pexpect's, untyped; imported here, with the first run (see the module docstring)
    from ptyprocess import PtyProcess  # type: ignore[import-untyped]  # noqa: PLC0415

    with _lock:
        close = getattr(PtyProcess, "close", None)
        if not callable(close):
            log.debug("ptyprocess has no PtyProcess.close: keeping its fixed delay")
            return False
        if not getattr(close, _MARK, False):
            PtyProcess.close = _wrap(close)
        return True
