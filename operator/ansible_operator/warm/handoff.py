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

Once the request is sent, the waiting is done by `/bin/sh` (`_WAITER`), exec'ed in
place of this interpreter with the socket as fd 3: a waiting Python costs about
3 MiB of private memory for the whole run, a waiting dash about 0.2 MiB, and a run
has up to two clients waiting (issue 11: the burst's peak PSS). The shell forwards
the same signals with `trap` and reads the status line with its `read` builtin, so
it forks nothing. Between the exec and the shell's first `trap` (well under a
millisecond) a forwarded signal ends the waiter unforwarded, as it would end a
client that is still starting; the keeper then kills the run as for SIGKILL. One
that lands after the traps but before `read` blocks is forwarded only when the
read returns, as for a Python client whose `recv` had not blocked yet.
Without an executable `/bin/sh` the client waits itself, as before.
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
_SHELL = "/bin/sh"
_STATUS_FD = 3
# Variables that would make the waiting shell run someone's code or print traces
# into the run's output (dash reads ENV only when interactive; bash is /bin/sh on
# some images and reads BASH_ENV, exported functions and SHELLOPTS).
_SHELL_VARS = frozenset({"ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "CDPATH"})


def _waiter_script() -> str:
    """POSIX sh that waits on fd 3 like `_wait_for_status` and exits like `_exit_with`.

    A trapped signal interrupts `read` (dash returns 1 then, as at EOF; bash carries
    on), so `got` tells the two apart and the partial line is kept."""
    traps = "".join(
        f"trap 'got=1; printf \"S{int(sig)}\\n\" >&{_STATUS_FD} 2>/dev/null' {int(sig)}\n"
        for sig in _FORWARDED
    )
    message = HELPER_DIED_MESSAGE.replace("'", "")
    return (
        traps
        + "line=\n"
        + "while :; do\n"
        + f"  part= got=; IFS= read -r part <&{_STATUS_FD}; rc=$?; line=$line$part\n"
        + '  [ "$rc" -eq 0 ] && break\n'
        + '  [ -n "$got" ] || break\n'
        + "done\n"
        + "case $line in\n"
        + '  R-[1-9]|R-[1-9][0-9]) s=${line#R-}; trap - "$s"; kill -"$s" $$; exit $((128 + s)) ;;\n'
        + "  R[0-9]|R[0-9][0-9]|R[0-9][0-9][0-9]) exit $((${line#R} & 255)) ;;\n"
        + "esac\n"
        + f"printf '%s\\n' '{message}' >&2\n"
        + f"exit {HELPER_DIED_EXIT}\n"
    )


_WAITER = _waiter_script()


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


def _wait_in_shell(sock: _socket.socket) -> None:
    """Exec `/bin/sh` to wait for the run (module docstring); returns only if it cannot."""
    if not os.access(_SHELL, os.X_OK):
        return
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in _SHELL_VARS and not name.startswith("BASH_FUNC_")
    }
    try:
        os.dup2(sock.fileno(), _STATUS_FD)
        os.set_inheritable(_STATUS_FD, True)  # dup2 onto itself keeps close-on-exec
        os.execve(_SHELL, ["sh", "-c", _WAITER], env)  # noqa: S606 - constant script
    except OSError:
        return


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
    _wait_in_shell(sock)
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
