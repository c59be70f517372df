"""Thin clients that hand a process to a warm server: the `ansible-playbook` shim and
the `ansible_python_interpreter` of the generated inventory.

Where this sits: supervisor.py writes two tiny scripts into the private `bin/` dir
(`#!<python> -IS`, so no site-packages scan: about 20 ms) that call `playbook_main`
or `interpreter_main` here. ansible-runner spawns the shim in place of
`ansible-playbook`; Ansible's local connection runs the interpreter client for every
Python module. Standard library only.

The client connects, sends its stdio fds, argv, environment and cwd, forwards
SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2, and exits with the run child's status
(dying by the same signal when the child was killed). SIGKILL cannot be forwarded:
the keeper notices the closed socket and kills the run's processes itself. When the
server cannot be reached, the client execs the real program, so the run goes cold.
"""

from __future__ import annotations

import _socket  # not socket.py, nor signal.py: both load enum (see protocol.py)
import os
import sys

from ansible_operator.warm.protocol import (
    HELPER_DIED_EXIT,
    HELPER_DIED_MESSAGE,
    MODULE_SOCKET_ENV,
    PLAYBOOK_SOCKET_ENV,
    Request,
    send_request,
)

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs 5 ms a task
if TYPE_CHECKING:  # annotations only, never at run time (see protocol.py on import costs)
    import signal as _signal  # the C module has no stubs; signal.py re-exports it
    from types import FrameType
    from typing import NoReturn
else:
    import _signal

__all__ = ["interpreter_main", "playbook_main", "run"]

_FORWARDED = (
    _signal.SIGTERM,
    _signal.SIGINT,
    _signal.SIGHUP,
    _signal.SIGQUIT,
    _signal.SIGUSR1,
    _signal.SIGUSR2,
)
_DEBUG_ENV = "AO_WARM_DEBUG"


def _exec_cold(real: str, argv: list[str], why: str) -> NoReturn:
    if os.environ.get(_DEBUG_ENV):
        os.write(2, f"warm client: cold fallback ({why})\n".encode())
    os.execv(real, [real, *argv])  # noqa: S606 - the cold path: the real program


def _connect(path: str) -> _socket.socket | None:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _wait_for_status(sock: _socket.socket) -> int:
    """The run child's exit code (negative: killed by that signal); raises EOFError
    when the keeper is gone without answering."""
    buffer = b""
    while b"\n" not in buffer:
        try:
            chunk = sock.recv(64)
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        if not chunk:
            raise EOFError
        buffer += chunk
    line = buffer.split(b"\n", 1)[0]
    if line[:1] != b"R":
        raise EOFError
    return int(line[1:])


def _exit_with(status: int) -> NoReturn:
    if status < 0:  # die the same way, so the parent sees the same wait status
        _signal.signal(-status, _signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        os._exit(128 - status)
    os._exit(status & 0xFF)


def run(*, socket_env: str, real: str, argv: list[str], stdin_script: bool = False) -> NoReturn:
    """Run `argv` in a child of the server named by `$socket_env`, or exec `real`."""
    path = os.environ.get(socket_env, "")
    sock = _connect(path) if path else None
    if sock is None:
        _exec_cold(real, argv, f"no server at {path!r}")
    request = Request(
        argv0=sys.argv[0],
        argv=argv,
        env=dict(os.environ),
        cwd=os.getcwd(),
        stdin_script=stdin_script,
    )
    try:
        send_request(sock, request)
    except OSError as error:  # the server died between connect and send: nothing ran
        sock.close()
        _exec_cold(real, argv, f"send: {error}")

    def forward(signum: int, _frame: FrameType | None) -> None:
        try:  # noqa: SIM105 - contextlib costs an import per task (protocol.py)
            sock.sendall(b"S%d\n" % signum)
        except OSError:
            pass

    for sig in _FORWARDED:
        _signal.signal(sig, forward)
    try:
        status = _wait_for_status(sock)
    except (EOFError, OSError, ValueError):
        os.write(2, HELPER_DIED_MESSAGE.encode() + b"\n")
        os._exit(HELPER_DIED_EXIT)
    _exit_with(status)


def playbook_main(*, real: str) -> NoReturn:
    """Entry point of the `ansible-playbook` shim."""
    run(socket_env=PLAYBOOK_SOCKET_ENV, real=real, argv=sys.argv[1:])


def interpreter_main(*, real: str) -> NoReturn:
    """Entry point of the interpreter client: only AnsiballZ module runs go warm."""
    argv = sys.argv[1:]
    if not argv:  # pipelining: the payload comes on stdin
        run(socket_env=MODULE_SOCKET_ENV, real=real, argv=argv, stdin_script=True)
    if len(argv) == 1 and os.path.basename(argv[0]).startswith("AnsiballZ_"):
        run(socket_env=MODULE_SOCKET_ENV, real=real, argv=argv)
    # Interpreter discovery, -c, -m, anything else: the real interpreter.
    os.execv(real, [real, *argv])  # noqa: S606 - argv is Ansible's own
