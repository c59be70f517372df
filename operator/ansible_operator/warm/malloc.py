"""How many glibc malloc arenas the operator and its warm servers may use.

Where this sits: cli.py calls `limit_this_process()` before the operator starts any
thread; supervisor.py starts both warm servers with `server_environment()`, so every
run child, Ansible worker and module child forked from them inherits the setting.

glibc gives each thread that allocates under contention an arena of its own (up to
8 per CPU) and keeps freed memory in it. The operator runs reconciles, the event
recorder, the API proxy and the watches in threads; Ansible's run child has a
results thread. With at most `defaults.MALLOC_ARENAS` arenas the burst of 100 CRs
peaked about 2-3 MiB lower in the operator and 3-4 MiB lower in each run child and
worker (issue 11, docs/runner.md); these threads hold the GIL to allocate anyway, so
they never contend for an arena. A `MALLOC_ARENA_MAX` already in the environment wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping

from ansible_operator.config import defaults

__all__ = ["ENV", "limit_this_process", "server_environment"]

ENV = "MALLOC_ARENA_MAX"
_M_ARENA_MAX = -8  # glibc's malloc.h


def limit_this_process(*, arenas: int = defaults.MALLOC_ARENAS) -> bool:
    """Cap this process's arenas (not when `MALLOC_ARENA_MAX` is set, or `arenas` is
    0, or the C library is not glibc); True when the cap was applied."""
    if arenas <= 0 or ENV in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: nothing to tune
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def server_environment(
    environ: Mapping[str, str], *, arenas: int = defaults.MALLOC_ARENAS
) -> dict[str, str]:
    """The environment a warm server starts with: `environ` plus the arena cap."""
    env = dict(environ)
    if arenas > 0:
        env.setdefault(ENV, str(arenas))
    return env
