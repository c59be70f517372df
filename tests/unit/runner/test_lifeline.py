"""`runner.lifeline`: what an operator process starts for its runs dies with it.

The "operator" here is a small Python child that starts a lifeline and one
long-running process carrying its owner value, as a run would; the test SIGKILLs
that child, as the OOM killer would, and watches what happens.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ansible_operator.runner import lifeline, sweep

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")

_OPERATOR = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from pathlib import Path
    from ansible_operator.runner.lifeline import Lifeline
    root = Path(sys.argv[1])
    line = Lifeline.start(runner_root=root)
    run = subprocess.Popen(["sleep", sys.argv[2]], env={**os.environ, **line.env()},
                           start_new_session=True)  # as Ansible's workers leave our session
    (root / "ready").write_text(f"{line.owner} {run.pid} {line.private_dir}")
    if sys.argv[3] == "stop":
        line.close()
    time.sleep(600)
    """
)


def _wait(check: object, timeout: float = 10.0) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():  # type: ignore[operator]
            return time.monotonic() - began
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout} s")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _start_operator(
    tmp_path: Path, length: str, mode: str
) -> tuple[subprocess.Popen[bytes], list[str]]:
    operator = subprocess.Popen(
        [sys.executable, "-c", _OPERATOR, str(tmp_path), length, mode],
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    _wait((tmp_path / "ready").exists)
    return operator, (tmp_path / "ready").read_text().split()


def test_a_killed_operators_runs_are_killed_within_a_second(tmp_path: Path) -> None:
    operator, (owner, run_pid, private) = _start_operator(tmp_path, "3001", "run")
    try:
        assert _alive(int(run_pid))
        assert Path(private).is_dir()
        operator.kill()
        operator.wait()
        took = _wait(lambda: not _alive(int(run_pid)))
        assert took < 2.0, took
        _wait(lambda: not Path(private).exists())
        assert sweep.kill_owned_processes(owner) == []
    finally:
        os.kill(int(run_pid), signal.SIGKILL) if _alive(int(run_pid)) else None
        operator.kill()


def test_a_graceful_close_also_ends_what_is_left(tmp_path: Path) -> None:
    operator, (_owner, run_pid, private) = _start_operator(tmp_path, "3002", "stop")
    try:
        _wait(lambda: not _alive(int(run_pid)))  # the operator itself still runs
        _wait(lambda: not Path(private).exists())
        assert operator.poll() is None
    finally:
        operator.kill()
        operator.wait()


def test_owners_are_recognised_after_their_pid_is_reused() -> None:
    mine = lifeline.new_owner()
    pid, ticks, _random = mine.split(".")
    assert int(pid) == os.getpid()
    assert lifeline.owner_alive(mine)
    assert not lifeline.owner_alive(f"{pid}.{int(ticks) + 1}.abcd")  # another process, same pid
    assert not lifeline.owner_alive("999999999.1.abcd")  # gone
    assert lifeline.owner_alive("not-an-owner")  # never kill what cannot be placed


def test_orphans_of_a_dead_owner_are_killed_and_a_live_owners_are_not(tmp_path: Path) -> None:
    dead = subprocess.Popen(
        ["sleep", "3003"],
        env={**os.environ, sweep.OWNER_ENV: "999999999.1.dead"},
        start_new_session=True,
    )
    live = subprocess.Popen(
        ["sleep", "3004"],
        env={**os.environ, sweep.OWNER_ENV: lifeline.new_owner()},
        start_new_session=True,
    )
    try:
        lifeline.sweep_orphans(tmp_path / "runs")
        _wait(lambda: dead.poll() is not None)
        assert live.poll() is None
    finally:
        for proc in (dead, live):
            proc.kill()
            proc.wait()
