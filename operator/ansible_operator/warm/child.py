"""Turn a freshly forked run child into what a newly exec'ed interpreter would be.

Where this sits: forkserver.py forks the run child inside a keeper and hands it to a
server's `child_main` (pbserver.py, modserver.py); those call `become_fresh()` and
then `run_main()`, which never returns.

What "fresh" covers: the client's stdio fds become 0-2 and new `sys.std*` streams
(buffered like CPython's at start-up); the run's environment replaces ours (through
`os.environ`, so exec'ed grandchildren inherit it), with cwd and `tempfile.tempdir`
re-read; signal dispositions are CPython's defaults; the process name carries the run
marker. What cannot be made fresh: `PYTHON*` variables and `-X` options (read when
the server started), the hash seed (shared by all children of one server), and
anything already imported, which is why the servers only pre-import modules that
read no per-run configuration at import time.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import ctypes
import io
import locale
import os
import signal
import sys
import tempfile
import traceback
import types
from typing import NoReturn

from ansible_operator.warm.protocol import MARKER_ENV, Request, run_comm

__all__ = [
    "adopt_settings",
    "become_fresh",
    "become_subreaper",
    "exit_like_python",
    "run_main",
    "set_process_name",
]

_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36
_RESET_TO_DEFAULT = (
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGCHLD,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


def set_process_name(name: str) -> None:
    """Set /proc/self/comm (inherited by fork, replaced by exec)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def become_subreaper() -> None:
    """Orphans of our descendants are re-parented to this process, not to init."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stream(fd: int, *, write: bool, errors: str, line_buffering: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w" if write else "r", closefd=False)
    buffered: io.BufferedWriter | io.BufferedReader = (
        io.BufferedWriter(raw) if write else io.BufferedReader(raw)
    )
    return io.TextIOWrapper(
        buffered, encoding="utf-8", errors=errors, line_buffering=line_buffering
    )


def become_fresh(
    fds: list[int], request: Request, *, base_path: list[str], main_dir: str | None
) -> None:
    """Take over the run's stdio, environment, cwd, signals and import path."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target, inheritable=True)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    marker = request.env.get(MARKER_ENV)
    if marker:
        set_process_name(run_comm(marker))
    adopt_settings(request, base_path=base_path, main_dir=main_dir)
    for sig in _RESET_TO_DEFAULT:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # what CPython sets at start-up
    with contextlib.suppress(locale.Error):  # unknown LANG: CPython carries on with "C"
        locale.setlocale(locale.LC_CTYPE, "")
    stdin = _stream(0, write=False, errors="strict", line_buffering=False)
    stdout = _stream(1, write=True, errors="strict", line_buffering=os.isatty(1))
    stderr = _stream(2, write=True, errors="backslashreplace", line_buffering=True)
    # Also the __std*__ originals: Ansible's display and atexit code look at them.
    sys.stdin = stdin
    sys.stdout = stdout
    sys.stderr = stderr
    sys.__stdin__ = stdin  # type: ignore[misc]
    sys.__stdout__ = stdout  # type: ignore[misc]
    sys.__stderr__ = stderr  # type: ignore[misc]


def adopt_settings(request: Request, *, base_path: list[str], main_dir: str | None) -> None:
    """Take over the run's environment, cwd and import path (what the settings a fresh
    interpreter reads at start-up come from); also how primed.py primes a child."""
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)  # putenv: exec'ed grandchildren see the run's env
    tempfile.tempdir = None  # cached from the server's TMPDIR otherwise
    sys.path[:] = ([main_dir] if main_dir is not None else []) + base_path


def exit_like_python(code: object) -> NoReturn:
    """Leave the way an interpreter does (`SystemExit` semantics, thread join, atexit,
    flush), then `os._exit`: the child must never return into the server's loop.
    As in CPython, a failing step is skipped and the exit carries on. The `run`
    command ends the operator this way too (cli.py), skipping the teardown."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
        status = 1
    threading = sys.modules.get("threading")
    if threading is not None:
        with contextlib.suppress(Exception):
            threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status & 0xFF)


def run_main(code: types.CodeType, *, filename: str | None) -> NoReturn:
    """Execute `code` as `__main__` and exit like a fresh interpreter would."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    if filename is not None:
        main.__file__ = filename
    main.__dict__["__cached__"] = None
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)  # noqa: S102 - this IS the interpreter's job here
    except SystemExit as stop:
        exit_like_python(stop.code)
    except BaseException:
        traceback.print_exc()
        exit_like_python(1)
    exit_like_python(0)
