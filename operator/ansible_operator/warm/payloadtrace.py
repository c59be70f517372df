"""What one AnsiballZ payload build read, listed and looked up, for payloadcache.py.

Where this sits: payloadcache.Cache.patch() wraps the `_find_module` of module_common's
two module_utils locator classes with `recording_find_module()`, once, when
ansible-playbook imports module_common in a warm run child. payloadcache's
`find_module_utils` then brackets each build it may share with `start()` and
`stop()`, in an Ansible worker process; payloadentries.records() turns the finished
`Trace` into an entry's manifest.

How: a `sys.addaudithook` hook (added by the first `start()` in a process: audit
hooks cannot be removed, so only processes that build get one) notes every file
opened read-only and every directory listed, and the recording locators note every
module_utils name looked up, under which search roots. Only the thread that started
the trace is recorded, and only while it is active; bytecode (`.pyc`) reads are the
controller's own code, never payload content. A failure inside the hook marks the
trace broken (it must never fail the audited call), and a broken trace is not shared.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Trace", "recording_find_module", "start", "stop"]


class Trace:
    """What one build in this process touched (filled by the audit hook and the
    recording locators, in the building thread only)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.started_ns = time.time_ns()
        self.reads: set[str] = set()
        self.listed: set[str] = set()
        self.legacy: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
        self.collections: set[tuple[str, ...]] = set()
        self.broken = False


class _State:
    """Per process (a forked worker inherits it together with the audit hook)."""

    active: Trace | None = None
    hooked = False


_STATE = _State()


def _absolute(path: object) -> str | None:
    if isinstance(path, int) or path is None:
        return None  # an fd: what it names was recorded when it was opened
    name = os.fsdecode(os.fspath(path))  # type: ignore[call-overload]
    return name if os.path.isabs(name) else os.path.join(os.getcwd(), name)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    trace = _STATE.active
    if trace is None or event not in ("open", "os.listdir", "os.scandir"):
        return
    try:  # an exception here would fail the audited call itself
        if trace.thread != threading.get_ident():
            return
        path = _absolute(args[0] if args else ".")
        if path is None:
            return
        if event != "open":
            trace.listed.add(path)
        # Bytecode is the controller's own code (the key has Ansible's version), never
        # payload content; its __pycache__ directories change whenever Python writes one.
        elif (
            isinstance(args[2], int)
            and args[2] & os.O_ACCMODE == os.O_RDONLY
            and not path.endswith(".pyc")
        ):
            trace.reads.add(path)
    except Exception:
        trace.broken = True


def start() -> Trace | None:
    """Record this thread's reads, listings and lookups from now on; None when the
    audit hook cannot be added (the build is then not shared)."""
    try:
        if not _STATE.hooked:  # once per process (hooks cannot be removed): builders only
            sys.addaudithook(_audit)
            _STATE.hooked = True
    except Exception:
        return None
    _STATE.active = Trace()
    return _STATE.active


def stop() -> None:
    """End the active trace (the hook stays, idle)."""
    _STATE.active = None


def recording_find_module(locator: Any, kind: str) -> Callable[..., Any]:
    """`_find_module` of one of module_common's locator classes, noting every name it
    looks up while a build is traced. Patched on the class itself: a subclass would
    break their `super(LegacyModuleUtilLocator, self)` calls."""
    find_module = locator._find_module

    def _find_module(self: Any, name_parts: Any) -> Any:
        trace = _STATE.active
        if trace is not None and trace.thread == threading.get_ident():
            try:
                if kind == "legacy":
                    trace.legacy.add((tuple(self._mu_paths or ()), tuple(name_parts)))
                else:
                    trace.collections.add(tuple(name_parts))
            except Exception:
                trace.broken = True
        return find_module(self, name_parts)

    _find_module.__wrapped__ = find_module  # type: ignore[attr-defined]
    return _find_module
