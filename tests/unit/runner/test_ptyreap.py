"""runner/ptyreap.py: pexpect's close reaps an exited child without its fixed 0.1 s sleep.

Real pexpect children (`sh -c`), as ansible-runner spawns them; what is checked is
which sleeps ptyprocess asks for and the exit status it reports, never a duration.
"""

from __future__ import annotations

import os

import pexpect
import ptyprocess.ptyprocess
import pytest

from ansible_operator.runner import ptyreap


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays ptyprocess's close asks for (they still happen)."""
    asked: list[float] = []
    real_sleep = ptyprocess.ptyprocess.time.sleep

    def recording_sleep(seconds: float) -> None:
        asked.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(ptyprocess.ptyprocess.time, "sleep", recording_sleep)
    assert ptyreap.install()
    return asked


def _run_to_eof(command: str) -> pexpect.spawn:
    child = pexpect.spawn("/bin/sh", ["-c", command], encoding="utf-8")
    child.expect(pexpect.EOF, timeout=10)  # what ansible-runner does before close()
    return child


@pytest.mark.parametrize(("command", "status"), [("exit 0", 0), ("echo out; exit 3", 3)])
def test_an_exited_child_is_reaped_with_its_status_and_no_fixed_sleep(
    sleeps: list[float], command: str, status: int
) -> None:
    child = _run_to_eof(command)
    child.close()
    assert child.exitstatus == status
    assert not child.isalive()
    assert 0.1 not in sleeps
    assert child.ptyproc.delayafterclose == 0.1  # restored for whoever reads it next
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped by ptyprocess, not left a zombie


def test_a_child_that_outlives_eof_is_still_terminated_as_before(sleeps: list[float]) -> None:
    # stdio closed (EOF), but the process keeps running: close() must still end it.
    # The pty's hang-up usually ends it at once; where SIGHUP does not reach it (seen in
    # the full suite only), ptyprocess waits for it after EOF, as it always did: so
    # it lives 5 s, not a minute.
    child = _run_to_eof("exec sleep 5 </dev/null >/dev/null 2>&1")
    child.close(force=True)
    assert not child.isalive()
    # Gone and reaped (no zombie left). Which signal ended it is the kernel's and
    # ptyprocess's business (the pty's hang-up can win the race under load).
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)


def test_the_exit_check_tells_running_from_exited_children() -> None:
    child = pexpect.spawn("/bin/sh", ["-c", "read line"], encoding="utf-8")
    try:
        assert not ptyreap.child_has_exited(child.pid)
        child.sendline("go")
        child.expect(pexpect.EOF, timeout=10)
        ptyreap._wait_for_exit(child.pid, 10)
        assert ptyreap.child_has_exited(child.pid)
        assert child.isalive() is False  # WNOWAIT left the status for ptyprocess
        assert child.exitstatus == 0
    finally:
        child.close()


def test_install_is_idempotent() -> None:
    assert ptyreap.install()
    patched = ptyprocess.PtyProcess.close
    assert ptyreap.install()
    assert ptyprocess.PtyProcess.close is patched
    assert getattr(patched, "__ao_ptyreap__", False)
