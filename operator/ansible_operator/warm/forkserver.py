"""The fork-server core shared by the playbook helper and the module server.

Where this sits: pbserver.py and modserver.py do their pre-imports and call
`serve(socket_path=..., child_main=...)`, which never returns. Clients (client.py)
connect; per connection this module forks a *keeper*, and the keeper forks the *run
child* that calls `child_main(fds, request)`.

Keeper duties (one per run, `setsid` + `PR_SET_CHILD_SUBREAPER`, so every orphan of
the run - Ansible's workers detach with `setsid` - re-parents to it):
* report the run child's exit status to the client (`R<code>\\n`), then wait for the
  orphans that are left (async tasks), as a cold run would leave them running;
* forward `S<signal>\\n` lines from the client to the run child;
* when the client's end closes first (ansible-runner SIGKILLs the shim's process group
  on cancel/timeout, and SIGKILL cannot be forwarded): SIGKILL every descendant until
  none is left, and remove the `ansible-local-<pid>*` dir the killed run child left.

The server is single-threaded and registers no atexit handlers. It exits when its
parent (the operator) is gone, or on SIGTERM, removing its socket.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, Protocol

from ansible_operator.warm import child, immortal
from ansible_operator.warm.protocol import KEEPER_COMM, ProtocolError, Request, recv_request

__all__ = [
    "ChildMain",
    "Router",
    "close_fds",
    "descendants",
    "kill_subtree",
    "reap",
    "serve",
    "start_keeper",
]

ChildMain = Callable[[list[int], Request], NoReturn]
"""Turns the forked run child into the run; never returns."""
_Parsed = tuple[list[int], Request]

_PARENT_CHECK_SECONDS = 1.0
_KILL_ROUNDS = 200
_KILL_PAUSE = 0.01
_CHILD_CRASHED = 70  # EX_SOFTWARE: child_main returned or raised
_REQUEST_SECONDS = 5.0  # a routed request is read in the loop: a stuck client is dropped


def descendants(root: int) -> list[int]:
    """Every live descendant of `root`, from /proc (children before grandchildren)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            parents[int(entry)] = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found: list[int] = []
    todo = [root]
    while todo:
        parent = todo.pop()
        kids = [pid for pid, ppid in parents.items() if ppid == parent]
        found += kids
        todo += kids
    return found


def reap(*, block: bool) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_subtree() -> None:
    """SIGKILL every descendant of this process until none is left (it must be a
    child subreaper, so orphans stay below it)."""
    me = os.getpid()
    for _ in range(_KILL_ROUNDS):
        pids = descendants(me)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        reap(block=False)
        time.sleep(_KILL_PAUSE)
    reap(block=False)


def remove_local_temp(pid: int, env: dict[str, str]) -> None:
    """Remove `ansible-local-<pid>XXXXXXXX` that the killed run child could not."""
    configured = env.get("ANSIBLE_LOCAL_TEMP") or "~/.ansible/tmp"
    if configured.startswith("~") and env.get("HOME"):
        configured = env["HOME"] + configured[1:]
    directory = os.path.expanduser(configured)
    pattern = re.compile(rf"ansible-local-{pid}[a-z0-9_]{{8}}")
    with contextlib.suppress(OSError):
        for entry in os.listdir(directory):
            if pattern.fullmatch(entry):
                shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)


def _supervise(conn: socket.socket, pid: int, request: Request) -> NoReturn:
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(conn, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    pending = b""
    while True:
        ready = dict(poller.poll())
        if pidfd in ready:
            _pid, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                conn.sendall(b"R%d\n" % os.waitstatus_to_exitcode(status))
            conn.close()
            reap(block=True)  # orphans (async tasks): wait for them, as cold leaves them
            os._exit(0)
        if conn.fileno() in ready:
            try:
                chunk = conn.recv(256)
            except OSError:
                chunk = b""
            if not chunk:  # the client is gone: the run is canceled
                kill_subtree()
                remove_local_temp(pid, request.env)
                os._exit(0)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line[:1] == b"S" and line[1:].isdigit():
                    with contextlib.suppress(OSError):
                        os.kill(pid, int(line[1:]))


def _keeper(conn: socket.socket, child_main: ChildMain, parsed: _Parsed | None) -> NoReturn:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    child.become_subreaper()
    child.set_process_name(KEEPER_COMM)  # not its server's name
    if parsed is None:
        try:
            parsed = recv_request(conn)
        except (ProtocolError, OSError) as error:
            print(f"warm server: bad request: {error}", file=sys.stderr, flush=True)
            os._exit(1)
    fds, request = parsed
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            child_main(fds, request)
        except BaseException:  # noqa: S110 - reported through the exit code
            pass
        os._exit(_CHILD_CRASHED)
    for fd in fds:  # the run child's copies only: pexpect must see EOF when it ends
        os.close(fd)
    _supervise(conn, pid, request)


def start_keeper(
    conn: socket.socket,
    child_main: ChildMain,
    *,
    parsed: _Parsed | None = None,
    close_in_child: Callable[[], None] = lambda: None,
) -> int:
    """Fork the keeper of one run (it reads the request itself unless `parsed`);
    `close_in_child` drops what the keeper must not hold (the listener, control
    sockets). The caller closes its own copies of `conn` and the fds."""
    pid = os.fork()
    if pid == 0:
        try:  # never fall back into the caller's loop (or its finally) in a keeper
            close_in_child()
            _keeper(conn, child_main, parsed)
        finally:
            os._exit(1)
    return pid


class Router(Protocol):
    """Takes a parsed request to another process that serves it (primed.py)."""

    def route(self, conn: socket.socket, fds: list[int], request: Request) -> bool:
        """True when the request was handed over; False: serve it here."""

    def close_in_child(self) -> None:
        """Close the router's sockets in a process forked from the server."""


class _Stop(Exception):
    pass


def _raise_stop(_signum: int, _frame: object) -> None:
    raise _Stop


def _listen(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600: only the operator's uid connects
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(256)
    return listener


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _dispatch(
    conn: socket.socket, listener: socket.socket, child_main: ChildMain, router: Router | None
) -> None:
    def close_in_child() -> None:
        listener.close()
        if router is not None:
            router.close_in_child()

    if router is None:  # the keeper reads the request: the loop never waits on a client
        start_keeper(conn, child_main, close_in_child=close_in_child)
        return
    try:
        conn.settimeout(_REQUEST_SECONDS)
        fds, request = recv_request(conn)
        conn.settimeout(None)
    except (ProtocolError, OSError) as error:
        print(f"warm server: bad request: {error}", file=sys.stderr, flush=True)
        return
    try:
        if not router.route(conn, fds, request):
            start_keeper(conn, child_main, parsed=(fds, request), close_in_child=close_in_child)
    finally:
        close_fds(fds)


def serve(
    *, socket_path: Path, child_main: ChildMain, name: str, router: Router | None = None
) -> NoReturn:
    """Accept requests until SIGTERM or until the parent process is gone."""
    parent = os.getppid()
    listener = _listen(socket_path)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:  # a SIGTERM while sealing (0.2 s) also removes the socket
        began = time.monotonic()
        sealed = immortal.seal()  # pre-imported objects are neither counted nor collected
        print(
            f"warm {name} server {os.getpid()} ready on {socket_path} ({len(sys.modules)}"
            f" modules, {sealed} objects sealed in {time.monotonic() - began:.2f} s)",
            file=sys.stderr,
            flush=True,
        )
        while os.getppid() == parent:
            readable, _w, _x = select.select([listener], [], [], _PARENT_CHECK_SECONDS)
            reap(block=False)
            if not readable:
                continue
            try:
                conn, _addr = listener.accept()
            except OSError:
                continue
            try:
                _dispatch(conn, listener, child_main, router)
            finally:
                conn.close()
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        with contextlib.suppress(OSError):
            socket_path.unlink()
    os._exit(0)
