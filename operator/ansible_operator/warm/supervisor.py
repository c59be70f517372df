"""Start, watch, restart and stop the two warm servers; hand runs their environment.

Where this sits: controller/manager.py creates one `WarmServers` per operator process
after leadership and before the first run, calls `start()`, passes it to
runner.ansible.AnsibleRunner (which calls `run_env()` and `interpreter` per run) and
calls `stop()` at shutdown. runner/ansible.py never talks to the servers itself.

Layout under `<runner root>/.warm-<operator pid>/` (0700; removed by `stop()`; one per
operator process, so two operators sharing a runner root never touch each other's;
a dead operator's directory is removed by the next one to start):

    bin/ansible-playbook   shim: client.playbook_main     (first on a warm run's PATH)
    interpreter            interpreter client: client.interpreter_main (not on PATH, so
                           a task's own `python` is never shadowed)
    playbook.sock          pbserver's socket (0600); in a private /tmp/ao-warm-* dir
    module.sock            modserver's socket (0600)   instead when the path is too long
                                                        for a Unix socket (108 bytes)
    playbook.log, module.log   the servers' stderr (start-up failures end up here)
    ansiballz/             built AnsiballZ payloads that warm runs share (payloadcache.py;
                           0700, entries 0600)

A server that died is restarted by the next `run_env()` call, without waiting (and at
most once per `restart_interval`, so a server that cannot start is not re-spawned for
every run): its clients exec the real programs meanwhile, so those runs are cold.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import ansible_operator
from ansible_operator.config import defaults
from ansible_operator.errors import WarmStartError
from ansible_operator.warm import malloc
from ansible_operator.warm.protocol import (
    ANSIBALLZ_CACHE_ENTRIES_ENV,
    ANSIBALLZ_CACHE_ENV,
    MODULE_SOCKET_ENV,
    PLAYBOOK_SOCKET_ENV,
)

__all__ = ["WarmServers", "remove_stale_directories", "start_warm_servers"]

log = logging.getLogger(__name__)

_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes: stay clear of the limit
_DIR_PREFIX = ".warm-"
_SHIM = """#!{python} -IS
# Written by ansible-operator (warm Ansible); see ansible_operator/warm/handoff.py.
import sys
sys.path.append({package_parent!r})
from ansible_operator.warm.handoff import {entry}
{entry}(real={real!r})
"""


@dataclass(frozen=True)
class _Spec:
    name: str
    module: str
    socket_env: str


_SPECS = (
    _Spec("playbook", "ansible_operator.warm.pbserver", PLAYBOOK_SOCKET_ENV),
    _Spec("module", "ansible_operator.warm.modserver", MODULE_SOCKET_ENV),
)


class WarmServers:
    """The playbook helper and the module server of one operator process."""

    def __init__(
        self,
        *,
        directory: Path,
        python: str = sys.executable,
        start_timeout: float = defaults.WARM_START_TIMEOUT,
        restart_interval: float = defaults.WARM_RESTART_INTERVAL,
        ansiballz_cache_entries: int = defaults.WARM_ANSIBALLZ_CACHE_ENTRIES,
        extra_env: Mapping[str, str] | None = None,
        idle_timeout: float = defaults.WARM_IDLE_TIMEOUT,
    ) -> None:
        self.directory = directory
        self._idle_timeout = idle_timeout  # 0: once started, up until stop()
        self._active = 0  # runs between acquire() and release()
        self._last_release = time.monotonic()
        self._idle = threading.Condition()  # wakes the idle watcher
        self._watcher: threading.Thread | None = None
        # In the servers' environment, so in /proc/<pid>/environ of every process they
        # fork: the lifeline's owner value (runner/lifeline.py).
        self._extra_env = dict(extra_env or {})
        self.bin_dir = directory / "bin"
        self.ansiballz_dir = directory / "ansiballz"
        self._ansiballz_cache_entries = ansiballz_cache_entries
        self.interpreter = str(directory / "interpreter")
        self._python = python
        self._start_timeout = start_timeout
        self._restart_interval = restart_interval
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._spawned_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stopped = False
        self._socket_dir = directory

    def socket_path(self, name: str) -> Path:
        return self._socket_dir / f"{name}.sock"

    def pids(self) -> dict[str, int]:
        """Pid of each server process that is alive (for tests and diagnostics)."""
        with self._lock:
            return {n: p.pid for n, p in self._procs.items() if p.poll() is None}

    def start(self) -> None:
        """Write the clients, start both servers now and wait until they listen (tests,
        benchmarks; the operator lets the first run start them: `acquire`).

        Raises WarmStartError when the directory cannot be prepared or no server came
        up; a single server that fails only logs a warning (its runs go cold).
        """
        self.prepare()
        with self._lock:
            self._start_locked()
            listening = [n for n in self._procs if self.socket_path(n).exists()]
        if not listening:
            raise WarmStartError("no warm Ansible server started; all runs go cold")

    def prepare(self) -> None:
        """Write the clients, start nothing: the first `acquire()` starts the servers.
        Raises WarmStartError when the directory cannot be prepared."""
        try:
            self._prepare_directory()
        except OSError as error:
            raise WarmStartError(f"cannot prepare {self.directory}: {error}") from error

    def acquire(self) -> dict[str, str]:
        """Before a run: the servers listening (started now if they are not: at the
        first run, or after an idle stop) and the run counted; its `run_env()`.
        Every acquire() needs its release()."""
        with self._lock:
            self._active += 1
            if not self._stopped and not self._procs:
                self._start_locked()
        return self.run_env()

    def release(self) -> None:
        """After a run: the servers stop once no run came for the idle timeout."""
        with self._lock:
            self._active -= 1
            self._last_release = time.monotonic()
        with self._idle:
            self._idle.notify_all()

    def _start_locked(self) -> None:
        """Spawn both servers and wait until they listen (the caller holds the lock:
        concurrent runs wait for the same start). A server that does not come up only
        makes its runs cold."""
        began = time.monotonic()
        for spec in _SPECS:
            self._spawn(spec)
        for spec in _SPECS:
            if not self._wait_listening(spec):
                log.warning(
                    "warm Ansible %s server did not start; its runs go cold: %s",
                    spec.name,
                    self._log_tail(spec.name),
                )
        log.info(
            "Warm Ansible servers started in %.2fs: %s",
            time.monotonic() - began,
            {n: p.pid for n, p in self._procs.items() if p.poll() is None},
        )
        if self._idle_timeout > 0 and self._watcher is None:
            self._watcher = threading.Thread(target=self._watch_idle, name="warm-idle", daemon=True)
            self._watcher.start()

    def _watch_idle(self) -> None:
        """Stop the servers after `idle_timeout` without runs; they start again with the
        next run (acquire). Never while a run is active: the lock orders the two."""
        while True:
            with self._idle:
                self._idle.wait(self._idle_timeout / 4)
            with self._lock:
                if self._stopped:
                    return
                idle_for = time.monotonic() - self._last_release
                if self._procs and self._active == 0 and idle_for >= self._idle_timeout:
                    log.info("Warm Ansible servers idle for %.0fs: stopping them", idle_for)
                    self._terminate(list(self._procs.values()), defaults.WARM_STOP_TIMEOUT)
                    self._procs.clear()

    def run_env(self) -> dict[str, str]:
        """The socket variables of one warm run and its shared AnsiballZ payload
        directory (the caller puts `bin_dir` first on PATH and names `interpreter` in
        the inventory); restarts a server that died."""
        with self._lock:
            if not self._stopped:
                for spec in _SPECS:
                    proc = self._procs.get(spec.name)
                    # A server that cannot start at all is retried only now and then.
                    due = self._spawned_at.get(spec.name, 0.0) + self._restart_interval
                    if proc is not None and proc.poll() is not None and time.monotonic() >= due:
                        log.warning(
                            "warm Ansible %s server exited with %s; restarting it",
                            spec.name,
                            proc.returncode,
                        )
                        self._spawn(spec)
        env = {spec.socket_env: str(self.socket_path(spec.name)) for spec in _SPECS}
        if self._ansiballz_cache_entries > 0:
            env[ANSIBALLZ_CACHE_ENV] = str(self.ansiballz_dir)
            env[ANSIBALLZ_CACHE_ENTRIES_ENV] = str(self._ansiballz_cache_entries)
        return env

    def stop(self, *, timeout: float = defaults.WARM_STOP_TIMEOUT) -> None:
        """Terminate both servers and remove the directory. Idempotent."""
        with self._lock:
            self._stopped = True
            procs = list(self._procs.values())
            self._procs.clear()
        with self._idle:
            self._idle.notify_all()
        self._terminate(procs, timeout)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self._socket_dir != self.directory:
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    # -- internals -------------------------------------------------------------

    @staticmethod
    def _terminate(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _prepare_directory(self) -> None:
        # A predecessor's directory (killed operator) may hold stale sockets.
        shutil.rmtree(self.directory, ignore_errors=True)
        self.bin_dir.mkdir(mode=0o700, parents=True)
        self.ansiballz_dir.mkdir(mode=0o700)
        os.chmod(self.directory, 0o700)
        os.chmod(self.ansiballz_dir, 0o700)  # payloadcache.install() refuses anything else
        if len(os.fsencode(self.directory / "playbook.sock")) >= _SUN_PATH_MAX:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="ao-warm-"))  # 0700
        package_parent = str(Path(ansible_operator.__file__).resolve().parent.parent)
        real_playbook = os.path.join(os.path.dirname(self._python), "ansible-playbook")
        shims = {
            self.bin_dir / "ansible-playbook": ("playbook_main", real_playbook),
            Path(self.interpreter): ("interpreter_main", self._python),
        }
        for path, (entry, real) in shims.items():
            text = _SHIM.format(
                python=self._python, package_parent=package_parent, entry=entry, real=real
            )
            path.write_text(text, encoding="utf-8")
            path.chmod(0o700)

    def _spawn(self, spec: _Spec) -> None:
        argv = [self._python, "-m", spec.module, "--socket", str(self.socket_path(spec.name))]
        self._spawned_at[spec.name] = time.monotonic()
        with (self.directory / f"{spec.name}.log").open("ab") as log_file:
            self._procs[spec.name] = subprocess.Popen(
                argv,
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                # Inherited by all it forks.
                env=malloc.server_environment({**os.environ, **self._extra_env}),
                # Its own session: a Ctrl-C or a group kill aimed at the operator's
                # terminal must not hit it; stop() ends it.
                start_new_session=True,
            )

    def _wait_listening(self, spec: _Spec) -> bool:
        deadline = time.monotonic() + self._start_timeout
        path = self.socket_path(spec.name)
        proc = self._procs[spec.name]
        while time.monotonic() < deadline:
            if path.exists():
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.02)  # polling a start-up that takes 0.3-1 s
        return False

    def _log_tail(self, name: str) -> str:
        try:
            text = (self.directory / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text.strip()[-2000:] or "(no output)"


def start_warm_servers(
    *,
    enabled: bool,
    runner_root: Path,
    extra_env: Mapping[str, str] | None = None,
    idle_timeout: float = defaults.WARM_IDLE_TIMEOUT,
    eager: bool = False,
) -> WarmServers | None:
    """The operator's warm servers, ready to start: the first run starts them (`eager`:
    now), and they stop after `idle_timeout` seconds without runs. None when turned
    off or when they cannot be set up (logged: every run then takes the cold path)."""
    if not enabled:
        log.info("Warm Ansible is off (--warm-ansible=false): every run starts cold")
        return None
    core = ansible_core_version()
    if ".".join(core.split(".")[:2]) not in defaults.WARM_ANSIBLE_CORE_LINES:
        log.warning(
            "Warm Ansible is off: ansible-core %s is not a line it supports (%s); "
            "every run starts cold",
            core,
            ", ".join(defaults.WARM_ANSIBLE_CORE_LINES),
        )
        return None
    remove_stale_directories(runner_root)
    servers = WarmServers(
        directory=runner_root / f"{_DIR_PREFIX}{os.getpid()}",
        extra_env=extra_env,
        idle_timeout=idle_timeout,
    )
    try:
        servers.start() if eager else servers.prepare()
    except WarmStartError as error:
        log.warning("Warm Ansible is not available, every run starts cold: %s", error)
        servers.stop()
        return None
    if not eager:
        idle = f"after {idle_timeout:g}s without runs" if idle_timeout > 0 else "never"
        log.info("Warm Ansible servers start with the first run and stop %s", idle)
    return servers


def ansible_core_version() -> str:
    """The installed ansible-core's version, "unknown" without one."""
    try:
        return importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def remove_stale_directories(runner_root: Path) -> list[Path]:
    """Remove the warm directories of operator processes that are gone (killed
    operators cannot clean up); returns what was removed."""
    removed = []
    try:
        entries = list(runner_root.iterdir())
    except OSError:
        return []
    for entry in entries:
        match = re.fullmatch(re.escape(_DIR_PREFIX) + r"([0-9]+)", entry.name)
        if match is None or not entry.is_dir():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and Path(f"/proc/{pid}").exists():
            continue  # another live operator's (or an unrelated process with its pid)
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
