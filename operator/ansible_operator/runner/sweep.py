"""Find and kill every process of a run, and remove the temp dirs the killed left.

Where this sits: runner/ansible.py calls `kill_run_processes(marker)` when a run is
canceled or timed out (before ansible-runner's own kill, and again after
`ansible_runner.run()` returns), then `remove_ansible_temp()` for the killed pids.
runner/lifeline.py calls `kill_owned_processes(owner)` when the operator process
that started the runs is gone (its watchdog), and `kill_orphaned_processes()` at
start-up (runs of earlier operators whose watchdog could not act either).

A run's processes are found two ways:
* exec'ed processes carry `AO_RUN_MARKER=<marker>` in /proc/<pid>/environ;
* processes forked from a warm server (the warm package) show the server's exec-time
  environment there instead, so their run child names itself `run_comm(marker)`
  (/proc/<pid>/comm, inherited by fork) and every Ansible worker it forks carries it.
Plus every other member of those processes' sessions (children that cleared their
environment). The operator's own process and session are never touched.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ansible_operator.warm.protocol import MARKER_ENV, run_comm

__all__ = [
    "MARKER_ENV",
    "OWNER_ENV",
    "kill_orphaned_processes",
    "kill_owned_processes",
    "kill_run_processes",
    "remove_ansible_temp",
]

log = logging.getLogger(__name__)

OWNER_ENV = "AO_RUN_OWNER"
"""One value per operator process, in the environment of everything it starts for its
runs (runner/lifeline.py): how its watchdog, or its successor, finds what it left."""

_KILL_ROUNDS = 50
_KILL_PAUSE = 0.02


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state, session id) of a live process from /proc/<pid>/stat, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the command name may contain anything
    try:
        return fields[0].decode(), int(fields[3])
    except (IndexError, ValueError):
        return None


def _comm(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/comm").read_bytes().rstrip(b"\n")
    except OSError:
        return b""


def _environ(pid: int) -> list[bytes] | None:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # another user's process, or gone: not ours to kill
        return None


def _scan(
    wanted: Callable[[int, list[bytes]], bool], *, sessions_led_by_marked: bool = False
) -> set[int]:
    """Live processes for which `wanted(pid, environ entries)` holds, plus the other
    members of their sessions (children that cleared their environment).

    The operator's own process and session are never included. With
    `sessions_led_by_marked`, a session is only taken whole when its leader is itself
    wanted: a run's sessions are led by its own processes (ansible-playbook under its
    pty, Ansible's workers, the warm keepers), while a terminal's session is led by a
    shell that must survive whatever it started.
    """
    own_pid, own_session = os.getpid(), os.getsid(0)
    sessions: dict[int, int] = {}
    marked: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own_pid:
            continue
        pid = int(entry)
        state = _proc_state(pid)
        if state is None or state[0] in {"Z", "X"}:  # zombies are already dead
            continue
        sessions[pid] = state[1]
        environ = _environ(pid)
        if environ is not None and wanted(pid, environ):
            marked.add(pid)
    run_sessions = {sessions[pid] for pid in marked} - {own_session}
    if sessions_led_by_marked:
        run_sessions &= marked
    return marked | {pid for pid, session in sessions.items() if session in run_sessions}


def _kill_until_gone(find: Callable[[], set[int]], *, what: str) -> list[int]:
    """SIGKILL what `find()` returns until it returns nothing; the pids signalled."""
    killed: set[int] = set()
    for _ in range(_KILL_ROUNDS):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # exited meanwhile, or not permitted
                continue
            killed.add(pid)
        time.sleep(_KILL_PAUSE)
    else:
        log.warning("processes of %s still alive after killing", what)
    return sorted(killed)


def kill_run_processes(marker: str) -> list[int]:
    """SIGKILL every process of the run tagged with `marker` until none is left.

    Linux only (reads /proc); elsewhere ansible-runner's own process-group kill is all
    there is. Returns the pids that were signalled.
    """
    if not os.path.isdir("/proc"):
        return []
    needle = f"{MARKER_ENV}={marker}".encode()
    comm = run_comm(marker).encode()

    def wanted(pid: int, environ: list[bytes]) -> bool:
        return needle in environ or _comm(pid) == comm

    return _kill_until_gone(lambda: _scan(wanted), what=f"run marker {marker}")


def kill_owned_processes(owner: str) -> list[int]:
    """SIGKILL every process that carries `OWNER_ENV=<owner>` (every run, warm server
    and helper of one operator process, see runner/lifeline.py) until none is left."""
    if not os.path.isdir("/proc"):
        return []
    needle = f"{OWNER_ENV}={owner}".encode()

    def find() -> set[int]:
        return _scan(lambda _pid, environ: needle in environ, sessions_led_by_marked=True)

    return _kill_until_gone(find, what=f"operator {owner}")


def kill_orphaned_processes(is_alive: Callable[[str], bool]) -> list[int]:
    """SIGKILL the processes of operators that are gone: those whose `OWNER_ENV` value
    names an owner for which `is_alive(owner)` is false. Returns the pids signalled."""
    if not os.path.isdir("/proc"):
        return []
    prefix = f"{OWNER_ENV}=".encode()
    verdicts: dict[bytes, bool] = {}

    def wanted(_pid: int, environ: list[bytes]) -> bool:
        for entry in environ:
            if entry.startswith(prefix):
                if entry not in verdicts:
                    verdicts[entry] = not is_alive(entry[len(prefix) :].decode(errors="replace"))
                return verdicts[entry]
        return False

    return _kill_until_gone(
        lambda: _scan(wanted, sessions_led_by_marked=True), what="operators that are gone"
    )


def remove_ansible_temp(pids: Iterable[int], environ: Mapping[str, str]) -> None:
    """Remove the temporary directories killed processes could not clean up:
    `ansible-local-<pid>XXXXXXXX` (ansible-playbook) and `ansible-tmp-<time>-<pid>-<n>`
    (modules over the local connection), in the configured or default temp dirs."""
    alternatives = "|".join(str(pid) for pid in sorted(set(pids)))
    if not alternatives:
        return
    # mkdtemp adds exactly 8 characters, so a pid cannot match another pid's directory.
    leftover = re.compile(
        rf"ansible-local-(?:{alternatives})[a-z0-9_]{{8}}"
        rf"|ansible-tmp-[0-9.]+-(?:{alternatives})-[0-9]+"
    )
    names = ("ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TEMP", "ANSIBLE_REMOTE_TMP")
    for directory in {os.path.expanduser(environ.get(n) or "~/.ansible/tmp") for n in names}:
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for entry in entries:
            if leftover.fullmatch(entry):
                shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)
