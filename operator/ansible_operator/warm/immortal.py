"""Seal a warm process's heap before it forks: make what it imported immortal.

Where this sits: forkserver.serve (both warm servers, before their loop) and the
primed child (primed.py, before it serves) call `seal()` where they used to call
`gc.freeze()`; nothing else does.

Why: a forked child shares its parent's pages until it writes to them, and CPython
writes to every object it merely uses: each reference taken or dropped changes the
object's reference count. A warm run child that does nothing but run a two-task play
touches thousands of function, code, class and dict objects of the modules it
inherited and so copies about 15 MiB of its parent's pages; its Ansible worker copies
another 8 (measured page by page with /proc/<pid>/pagemap, docs/runner.md, "Memory
during a burst"). Since Python 3.12 (PEP 683) an object whose count holds the
immortal value is never counted: taking or dropping a reference writes nothing. So
the parent, once its imports are done and before its first fork, walks everything
reachable from `sys.modules` and gives it that value. Then the children share those
pages for their whole life.

What it costs: the sealed objects are never freed, which is what an imported module's
functions, classes and constants are anyway; a module a run deletes from
`sys.modules` stays in memory. Only objects reachable from a module are sealed, not
the caller's own frames: a socket or file a caller holds is still closed when its
last reference goes. The walk takes about 0.2 s, once per server and per primed child.

Where it does nothing: any Python but CPython 3.12 and 3.13 with the GIL (the
immortal value and the check for it are laid out differently elsewhere), or when
`AO_WARM_SEAL=0` (`SEAL_ENV`; for the measured comparison in docs/runner.md; any
other value than 0 or 1 is reported on the server's stderr and ignored). A probe
checks, on the real interpreter, that counting a sealed object writes nothing before
anything is sealed.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import sysconfig

__all__ = ["SEAL_ENV", "is_sealed", "seal", "supported"]

SEAL_ENV = "AO_WARM_SEAL"
"""0 turns sealing off (the servers and primed children then only `gc.freeze()`)."""

# CPython 3.12/3.13, 64-bit, GIL build: ob_refcnt is the first word of every object;
# an object is immortal when the low 32 bits, read as a signed int, are negative, and
# immortal objects hold exactly this value (_Py_IMMORTAL_REFCNT).
_IMMORTAL = 0xFFFFFFFF
_SIGN_OF_LOW_HALF = 0x80000000


def _count(address: int) -> ctypes.c_ssize_t:
    return ctypes.c_ssize_t.from_address(address)


def _immortal(count: int) -> bool:
    return bool(count & _SIGN_OF_LOW_HALF)


def is_sealed(obj: object) -> bool:
    """True when `obj`'s reference count holds the immortal value."""
    return _immortal(_count(id(obj)).value)


def _probe() -> bool:
    """Check that the first word of an object is its count (it follows references
    one by one), then seal a throwaway object, take and drop references, and check
    its count never moved; unseal it again, so a failed probe leaves nothing behind."""
    probe = object()
    count = _count(id(probe))
    before = count.value
    holder = [probe]
    if before != sys.getrefcount(probe) - 2 or count.value != before + 1:
        return False  # another layout (a --with-trace-refs build puts two links first)
    del holder
    count.value = _IMMORTAL
    try:
        holders = [probe, probe, probe]
        del holders
        return count.value == _IMMORTAL and is_sealed(probe)
    finally:
        count.value = before


def supported() -> bool:
    """Whether this interpreter counts references the way `seal()` relies on."""
    return (
        sys.implementation.name == "cpython"
        and sys.version_info[:2] in ((3, 12), (3, 13))
        and sys.maxsize > 2**32
        and not sysconfig.get_config_var("Py_GIL_DISABLED")
        and not hasattr(sys, "getobjects")  # a --with-trace-refs build
        and _probe()
    )


# Read once, at import: in the warm server, before a primed child takes over a run's
# environment (a run's own AO_WARM_SEAL must not decide for its primed child).
_SETTING = os.environ.get(SEAL_ENV, "").strip()


def _enabled() -> bool:
    value = _SETTING
    if value not in ("", "0", "1"):
        print(
            f"warm server: {SEAL_ENV}={value!r} is neither 0 nor 1; sealing stays on",
            file=sys.stderr,
            flush=True,
        )
    return value != "0" and supported()


def _seal_reachable(roots: list[object]) -> int:
    """Give every object reachable from `roots` the immortal count; return how many.

    The count itself marks what was visited: an object already immortal is skipped
    with its referents, so no set of visited objects is built (it would stay in the
    heap as garbage) and a second call (a primed child's, after its helper's) walks
    only what it reaches through objects that are not sealed yet. What is new but
    reachable only through a sealed container (a new entry in a sealed cache) stays
    an ordinary object: about 500 of the primed child's 100,000, which costs a few
    copied pages, never correctness.
    """
    stack = roots
    sealed = 0
    while stack:
        obj = stack.pop()
        count = _count(id(obj))
        if _immortal(count.value):
            continue
        count.value = _IMMORTAL
        sealed += 1
        stack.extend(gc.get_referents(obj))
    return sealed


def seal() -> int:
    """Seal what `sys.modules` reaches (when supported and not turned off), then
    `gc.freeze()`; return how many objects were sealed (0: only frozen)."""
    sealed = 0
    if _enabled():
        sealed = _seal_reachable(list(sys.modules.values()))
    gc.freeze()  # also for what is not sealed: the collector then never walks it
    return sealed
