"""Every process of every run dies with the operator that started it, whatever kills it.

Where this sits: `ansible-operator run` (controller/manager.py) calls
`Lifeline.start()` first, before the warm servers and the first run, hands
`env()` to the warm servers and the runner, and calls `close()` last. The
watchdog it starts runs this module's `main()` once the operator is gone.

The problem it solves: Ansible's workers leave their parent's session
(`setsid`), and a warm run's keeper waits for them; after a SIGKILL of the
operator (or the OOM killer, or a crash) nothing of ours was left to cancel
them, so a task such as `sleep 30; touch marker` finished 30 s after the
operator died, and a restarted operator could run the same custom resource
again while the orphan still ran.

How a run's processes are tied to the operator:

* Every process started for a run carries `AO_RUN_OWNER=<owner>` (sweep.OWNER_ENV),
  one value per operator process, made of its pid and start time: exec'ed
  processes in their environment, processes forked from the warm servers
  through the servers' own exec-time environment (they are started with it).
* A watchdog, started in a session of its own, holds the read end of a pipe
  whose only write end is the operator's (close-on-exec, so no child holds a
  copy): the kernel closes it whatever ends the operator, and the watchdog's
  read returns at once. It waits as `/bin/sh` (0.2 MiB instead of a Python's
  4) and only then execs Python, which SIGKILLs everything carrying the
  owner (runner/sweep.py) and removes what those processes left behind:
  the scratch directories of their runs (Ansible's own temp dirs are inside
  them, see runner/tempdirs.py), the warm directory, the operator's private
  temp directories. It takes well under a second.
* If the watchdog was killed too, the next operator to start on the machine
  kills the processes whose owner is gone (`sweep_orphans`) before its first run.

Why not the other ways: a parent-death signal (`PR_SET_PDEATHSIG`) fires when
the parent *thread* exits, is cleared in forked children, and would have to be
set inside processes that are Ansible's (its workers, a module's `sh -c`);
process groups and sessions are exactly what Ansible's workers leave; a cgroup
per run would be exact, but needs a delegated, writable cgroup tree that an
operator's pod does not have (nor do cgroup v1 hosts without systemd, such as
our CI machines), so it could not be the mechanism everywhere. The keepers of
warm runs already watch their client, but the cold path has no keeper.

Limits: Linux only (it reads /proc); a process that both clears its
environment and leaves the run's sessions escapes, as with cancellation.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import ansible_operator
from ansible_operator.kube import login
from ansible_operator.runner import inputdir, sweep

__all__ = ["PRIVATE_DIR_PREFIX", "Lifeline", "main", "owner_alive", "sweep_orphans"]

log = logging.getLogger("ansible_operator.lifeline")

PRIVATE_DIR_PREFIX = "ansible-operator-private-"
"""The operator's own temp directory (run kubeconfigs): `<prefix><pid>-*` in $TMPDIR."""
_STALE_PREFIXES = (PRIVATE_DIR_PREFIX, login.LOGIN_DIR_PREFIX)
_SHELL = "/bin/sh"
# Returns when the pipe reaches end-of-file (the operator is gone, by any means),
# then becomes the sweep. A line ("stop") ends it too: nothing else is written.
_WAITER = 'read -r _line || :; exec "$@"'
_STAT_STARTTIME = 19  # field 22 of /proc/<pid>/stat, counted after the command name
# The watchdog's Python: the package's parent comes as the first argument.
_ENTRY = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from ansible_operator.runner.lifeline import main; sys.exit(main(sys.argv[1:]))"
)


def _start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()
    return fields[_STAT_STARTTIME].decode() if len(fields) > _STAT_STARTTIME else None


def new_owner() -> str:
    """`<pid>.<start time in clock ticks>.<random>`: unique, and tells whether its
    process still lives even after the pid was reused."""
    return f"{os.getpid()}.{_start_ticks(os.getpid()) or 0}.{secrets.token_hex(4)}"


def owner_alive(owner: str) -> bool:
    """Does the operator process that `owner` names still run? Unparsable values are
    taken as alive: never kill what we cannot place."""
    pid, _, rest = owner.partition(".")
    ticks = rest.partition(".")[0]
    if not (pid.isdigit() and ticks.isdigit()):
        return True
    return _start_ticks(int(pid)) == ticks


class Lifeline:
    """One operator process's owner value and its watchdog."""

    def __init__(self, *, owner: str, private_dir: Path) -> None:
        self.owner = owner
        self.private_dir = private_dir
        self._write_fd: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls, *, runner_root: Path, python: str = sys.executable, log_args: Sequence[str] = ()
    ) -> Lifeline:
        """Sweep what dead operators left, then start this one's watchdog.

        `log_args` (`--zap-encoder`, `--zap-time-encoding`) format the watchdog's line.
        """
        sweep_orphans(runner_root)
        parent = Path(tempfile.gettempdir())
        private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_DIR_PREFIX}{os.getpid()}-", dir=parent))
        lifeline = cls(owner=new_owner(), private_dir=private)
        lifeline._spawn(runner_root, python, log_args)
        return lifeline

    def env(self) -> dict[str, str]:
        """What every process started for a run must carry."""
        return {sweep.OWNER_ENV: self.owner}

    def _spawn(self, runner_root: Path, python: str, log_args: Sequence[str]) -> None:
        # -I -S: no site processing before the kill (a loaded machine spends most of a
        # second on it); main() turns it on afterwards, for the clean-up's imports.
        package_parent = str(Path(ansible_operator.__file__).resolve().parent.parent)
        sweep_argv = [
            python,
            "-I",
            "-S",
            "-c",
            _ENTRY,
            package_parent,
            f"--owner={self.owner}",
            f"--runner-root={runner_root}",
            f"--private-dir={self.private_dir}",
            *log_args,
        ]
        waiter = os.access(_SHELL, os.X_OK)
        argv = [_SHELL, "-c", _WAITER, "ao-lifeline", *sweep_argv] if waiter else sweep_argv
        if not waiter:
            argv.append("--wait")
        read_fd, write_fd = os.pipe()  # both close-on-exec: only the watchdog gets one
        try:
            self._watchdog = subprocess.Popen(
                argv,
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                cwd="/",
                # Out of the operator's session: a Ctrl-C or a kill of the operator's
                # process group must leave the watchdog to do its work.
                start_new_session=True,
            )
        finally:
            os.close(read_fd)
        self._write_fd = write_fd

    def close(self) -> None:
        """At the operator's exit: the watchdog sweeps in the background (after a
        graceful stop there is usually nothing left) and removes the private dir."""
        if self._write_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._write_fd)
            self._write_fd = None


def sweep_orphans(runner_root: Path) -> None:
    """What operators that are gone left on this machine: their processes (found by
    an owner that no longer runs), then their directories. Called at start-up."""
    killed = sweep.kill_orphaned_processes(owner_alive)
    if killed:
        log.warning("Killed %d processes of runs of operators that are gone", len(killed))
        sweep.remove_ansible_temp(killed, os.environ)
    _remove_leftovers(runner_root)


def _remove_leftovers(runner_root: Path) -> None:
    parent = Path(tempfile.gettempdir())
    for prefix in _STALE_PREFIXES:
        login.sweep_stale_dirs(parent, prefix)
    removed = inputdir.sweep_scratch_dirs(runner_root)
    if removed:
        log.info("Removed %d scratch directories of runs that never finished", removed)
    # Here, not at the top: the watchdog kills first and imports the configuration
    # layer (about 50 ms) only afterwards.
    from ansible_operator.warm import supervisor  # noqa: PLC0415

    supervisor.remove_stale_directories(runner_root)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ansible-operator lifeline")
    parser.add_argument("--owner", required=True)
    parser.add_argument("--runner-root", type=Path, required=True)
    parser.add_argument("--private-dir", type=Path, required=True)
    parser.add_argument("--wait", action="store_true", help="wait for end-of-file on stdin")
    parser.add_argument("--zap-encoder", default=None)
    parser.add_argument("--zap-time-encoding", default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The watchdog, once the operator is gone: kill its runs, remove their leftovers."""
    args = _parse(argv)
    if args.wait:  # no /bin/sh to wait in: wait here
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
    killed = sweep.kill_owned_processes(args.owner)  # first: every moment counts
    if sys.flags.no_site:  # started with -S (Lifeline._spawn): site-packages from now on
        import site  # noqa: PLC0415

        site.main()
    # Only now: the observability package imports the kubernetes client (0.25 s).
    from ansible_operator.observability.logging import setup_logging  # noqa: PLC0415

    setup_logging(encoder=args.zap_encoder, time_encoding=args.zap_time_encoding)
    if killed:
        log.warning(
            "The operator (pid %s) is gone: killed the %d processes of its runs",
            args.owner.partition(".")[0],
            len(killed),
        )
        sweep.remove_ansible_temp(killed, os.environ)
    shutil.rmtree(args.private_dir, ignore_errors=True)
    _remove_leftovers(args.runner_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
