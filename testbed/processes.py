"""Start, check and stop the testbed's component processes.

Called by `control_plane.ControlPlane`. Each component runs in its own session
(so its own process group), logs to a file, and is recorded as a `Process`
with its pid and command line. Stopping signals the whole group, and only
after checking that the pid still runs the command we started: a pid reused by
an unrelated process after a crash is never killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Process:
    name: str
    pid: int
    argv: tuple[str, ...]
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Process:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            argv=tuple(str(a) for a in data["argv"]),
            log=str(data["log"]),
        )


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> Process:
    """Start `argv` in a session of its own. `prefix` is a command that execs
    `argv` (such as `nsenter ... --`); the record names `argv`, which is what
    the process runs once the prefix has exec'd."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        child = subprocess.Popen(
            [*prefix, *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=dict(env) if env is not None else None,
        )
    return Process(name=name, pid=child.pid, argv=tuple(argv), log=str(log))


# How our own children ended, by pid, as collected by `_reap`: the only record
# of a component that died before writing a line to its log.
_ended: dict[int, int] = {}


def _is_our_child(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[-1].split()[1]) == os.getpid()  # state, ppid, ...


def _reap(pid: int) -> None:
    # A child of this very process stays a zombie until waited for.
    with contextlib.suppress(ChildProcessError, OSError):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            _ended[pid] = status


def how_it_ended(proc: Process, *, settle: float = 2.0) -> str:
    """'exit code N' or 'killed by SIGNAME' for a child that ended, else ''.

    Callers ask once `is_running` said no, which it says as soon as an exiting
    process has dropped its command line, a moment before it becomes a zombie that
    can be reaped: wait up to `settle` seconds for that moment."""
    deadline = time.monotonic() + settle
    _reap(proc.pid)
    while proc.pid not in _ended and time.monotonic() < deadline and _is_our_child(proc.pid):
        time.sleep(0.01)
        _reap(proc.pid)
    status = _ended.get(proc.pid)
    if status is None:
        return ""
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def is_running(proc: Process) -> bool:
    """True if `proc.pid` is alive (not a zombie) and still runs `proc.argv[0]`."""
    _reap(proc.pid)
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state in {"Z", "X"}:
        return False
    return cmdline.split(b"\0", 1)[0].decode(errors="replace") == proc.argv[0]


def wait_exec(proc: Process, timeout: float = 10.0) -> bool:
    """Wait until a process started through a prefix (`spawn(prefix=...)`)
    runs its own program; False if it ended or did not get there in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_running(proc):
            return True
        if how_it_ended(proc, settle=0):
            return False
        time.sleep(0.01)
    return False


def rss_bytes(proc: Process) -> int:
    """Resident memory of the process, 0 if it is gone."""
    try:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def stop(proc: Process, *, grace: float) -> None:
    """SIGTERM the process group, wait up to `grace` seconds, then SIGKILL."""
    if not is_running(proc):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not is_running(proc):
                return
            time.sleep(0.05)


def tail(path: str | Path, lines: int = 30) -> str:
    try:
        content = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(content[-lines:])
