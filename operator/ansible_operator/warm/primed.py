"""Primed children: forks of the playbook helper that have imported Ansible's controller.

Where this sits: the playbook helper (pbserver.py) passes a `PrimedChildren` to
forkserver.serve() as its router. The helper itself may not import `ansible.constants`
(every run must read its own configuration), so without this every run child imports
about 130 controller modules itself: about 0.1 s of CPU a run, a third of a warm run
(docs/runner.md, "Primed children"). A primed child does those imports once for one configuration
(configkey.py says which runs share one) and forks the keepers and run children of
every run with that configuration.

Life of a primed child:

* The helper reads a request in its loop and computes its key. For a new key it forks
  a child with a socket pair; the child takes over that request's environment, cwd
  and argv0, imports `PRIME_MODULES` with its stdout and stderr in a memory
  file, and answers `K` (ready), or `F` when the import failed or printed anything
  (a config warning that every cold run would show): then the key is remembered as
  refused and its runs fork from the helper as before, showing what a cold run shows.
* The helper forwards each request with that key (the client's connection and its
  three stdio fds, SCM_RIGHTS) and forgets it; the child forks a keeper
  (forkserver.start_keeper) exactly as the helper would, so supervision, signals and
  clean-up are unchanged.
* In the run child, `after_fork()` reads the per-run settings again (configkey), and
  redoes what Ansible did at import with the process's stdio (its display).
* At most `limit` children live; the least recently used one is closed first. A child
  exits when its socket closes (helper gone or eviction) and is reaped by the helper.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import select
import shutil
import signal
import socket
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NoReturn

from ansible_operator.warm import child, configkey, immortal
from ansible_operator.warm.forkserver import ChildMain, close_fds, reap, start_keeper
from ansible_operator.warm.protocol import (
    PRIMED_COMM,
    ProtocolError,
    Request,
    recv_request,
    send_request,
)

__all__ = ["PRIME_MODULES", "PrimedChildren", "after_fork"]

PRIME_MODULES = (
    # What a run child of the helper imports itself (ansible-core 2.21, a role run):
    # the CLI first, then the executor and plugin base modules it loads while it runs.
    # Plugins themselves are left to Ansible's plugin loader.
    "ansible.cli.playbook",
    "ansible.executor.process.worker",
    "ansible.executor.task_executor",
    "ansible.plugins.strategy",
    "ansible.plugins.connection",
    "ansible.plugins.shell",
    "ansible.plugins.cache",
    "ansible.plugins.inventory",
    "ansible.plugins.vars",
    "ansible.playbook.included_file",
    "ansible.playbook.handler_task_include",
    "ansible.playbook.role_include",
)
_READY = b"K"
_REFUSED = b"F"
_PARENT_CHECK_SECONDS = 1.0
_REFUSED_KEYS = 64  # remembered refusals (each a sha256 key)


@dataclass
class _Primed:
    pid: int
    sock: socket.socket


class PrimedChildren:
    """The helper's side: one primed child per configuration key, at most `limit`."""

    def __init__(
        self,
        *,
        child_main: ChildMain,
        definitions: configkey.Definitions,
        base_path: list[str],
        main_dir: str,
        limit: int,
        prime_timeout: float,
    ) -> None:
        self._child_main = child_main
        self._definitions = definitions
        self._base_path = base_path
        self._main_dir = main_dir
        self._limit = limit
        self._timeout = prime_timeout
        self._live: OrderedDict[str, _Primed] = OrderedDict()
        self._refused: OrderedDict[str, None] = OrderedDict()
        # An evicted child exits while its keepers may still supervise runs: they are
        # re-parented to the helper (reaped by its loop, still in the operator's tree).
        child.become_subreaper()

    def route(self, conn: socket.socket, fds: list[int], request: Request) -> bool:
        try:
            key = configkey.key_for(request, self._definitions)
        except Exception as error:  # never fail a run for the optimisation
            _log(f"no configuration key ({error!r}); serving it unprimed")
            return False
        if key in self._refused:
            return False
        primed = self._live.get(key)
        if primed is None:
            try:
                primed = self._spawn(key, request)
            except OSError as error:  # no fd or process left: serve it unprimed
                _log(f"cannot start a primed child ({error}); serving it unprimed")
                return False
            if primed is None:
                return False
        self._live.move_to_end(key)
        try:
            send_request(primed.sock, request, fds=(conn.fileno(), *fds))
        except OSError as error:
            _log(f"primed child {primed.pid} is gone ({error}); serving it unprimed")
            self._close(key)
            return False
        return True

    def close_in_child(self) -> None:
        for primed in self._live.values():
            primed.sock.close()

    def _close(self, key: str) -> None:
        primed = self._live.pop(key, None)
        if primed is not None:
            primed.sock.close()  # the child exits on EOF; serve() reaps it

    def _refuse(self, key: str, reason: str) -> None:
        _log(f"runs of this configuration are not primed: {reason}")
        self._refused[key] = None
        while len(self._refused) > _REFUSED_KEYS:
            self._refused.popitem(last=False)

    def _spawn(self, key: str, request: Request) -> _Primed | None:
        while len(self._live) >= self._limit:
            self._close(next(iter(self._live)))
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                _primed_main(theirs, request, self._child_main, self._base_path, self._main_dir)
            finally:
                os._exit(1)
        theirs.close()
        try:
            ours.settimeout(self._timeout)
            answer = ours.recv(4096)
            ours.settimeout(None)
        except OSError as error:
            answer = _REFUSED + f"no answer ({error})".encode()
        if answer[:1] != _READY:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            ours.close()
            self._refuse(key, answer[1:].decode(errors="replace") or "it exited")
            return None
        primed = _Primed(pid=pid, sock=ours)
        self._live[key] = primed
        return primed


def _log(message: str) -> None:
    print(f"warm playbook server: {message}", file=sys.stderr, flush=True)


def _prime(request: Request, *, base_path: list[str], main_dir: str) -> str | None:
    """Import the controller as this request's run would; the reason when it must not
    be shared."""
    child.adopt_settings(request, base_path=base_path, main_dir=main_dir)
    sys.argv = [request.argv0]
    captured = os.memfd_create("ao-primed-stdio")
    for fd in (1, 2):
        os.dup2(captured, fd)
    try:
        for name in PRIME_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                if name == PRIME_MODULES[0]:
                    raise
    except BaseException as error:  # SystemExit included: Ansible exits on a bad config
        return f"importing the controller failed: {error!r}"
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    if os.fstat(captured).st_size:
        return "Ansible printed a message at start-up (each run must show it)"
    os.close(captured)
    return None


def _drop_own_local_temp() -> None:
    """The child's own `ansible-local-<pid>` dir: each run creates its own."""
    constants: Any = sys.modules.get("ansible.constants")
    manager: Any = sys.modules.get("ansible.config.manager")
    if constants is None or manager is None:  # the import failed before that point
        return
    atexit.unregister(manager.cleanup_tmp_file)
    local = getattr(constants, "DEFAULT_LOCAL_TMP", None)
    if isinstance(local, str):
        shutil.rmtree(local, ignore_errors=True)


def _primed_main(
    sock: socket.socket,
    request: Request,
    child_main: ChildMain,
    base_path: list[str],
    main_dir: str,
) -> NoReturn:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    child.set_process_name(PRIMED_COMM)
    # Everything inherited from the helper but this socket: the listener, other primed
    # children's sockets, the first request's connection and stdio (a held pty would
    # keep ansible-runner from seeing the run end). The frames owning those objects
    # never run again: this process leaves through os._exit only.
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    reason = _prime(request, base_path=base_path, main_dir=main_dir)
    _drop_own_local_temp()  # also when refused: this process leaves by os._exit
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)
    if reason is not None:
        with contextlib.suppress(OSError):
            sock.sendall(_REFUSED + reason.encode()[:4000])
        os._exit(0)
    configkey.per_run_settings()  # found once here; every run child inherits the list
    immortal.seal()  # as in the helper: the controller's objects are shared for good
    sock.sendall(_READY)
    _serve(sock, child_main)


def _serve(sock: socket.socket, child_main: ChildMain) -> NoReturn:
    parent = os.getppid()
    while os.getppid() == parent:
        readable, _w, _x = select.select([sock], [], [], _PARENT_CHECK_SECONDS)
        reap(block=False)
        if not readable:
            continue
        try:
            fds, request = recv_request(sock, nfds=4)
        except (ProtocolError, OSError):
            break  # closed: the helper is gone or evicted us
        conn = socket.socket(fileno=fds[0])
        try:
            start_keeper(conn, child_main, parsed=(fds[1:], request), close_in_child=sock.close)
        finally:
            conn.close()
            close_fds(fds[1:])
    os._exit(0)


def after_fork() -> None:
    """In a run child of a primed child, after child.become_fresh(): what Ansible read
    at import that differs per run. No-op in a run child of the helper itself."""
    if "ansible.constants" not in sys.modules:
        return
    configkey.refresh_settings()
    display: Any = sys.modules["ansible.utils.display"]
    instance = display.Display()  # the singleton the controller modules hold
    # Its lock, terminal width and the stdout/stderr wrapping were made for the primed
    # child's stdio; a fresh start makes them for this run's (a new lock, too).
    type(instance).__init__(instance)
    color = sys.modules.get("ansible.utils.color")
    if color is not None:
        # It decides once, at import, whether stdout is a colour terminal: the primed
        # child's stdout was a memory file. Its functions read the module's globals.
        importlib.reload(color)
    cli: Any = sys.modules["ansible.cli"]
    cli.check_blocking_io()
