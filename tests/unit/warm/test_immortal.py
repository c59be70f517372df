"""warm/immortal.py: what `seal()` makes immortal, what it leaves alone, and its switch.

Sealing changes the process it runs in for good, so each case runs in a fresh
interpreter (`_sealed_in_child`), never in the test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from typing import Any

import pytest

from ansible_operator.warm import immortal

_CHILD = r"""
import ctypes, gc, json, os, socket, sys, types, weakref
from ansible_operator.warm import immortal

if os.environ.get("TEST_AS_UNSUPPORTED"):  # what another interpreter gets
    immortal.supported = lambda: False

module = types.ModuleType("sealme")
exec(
    "def f(x):\n    return x + 1\n"
    "class C:\n    def m(self):\n        return 2\n"
    "TABLE = {'k': [1, 2]}\n",
    module.__dict__,
)
sys.modules["sealme"] = module

def check():
    held = socket.socket()  # only this frame holds it: it must still be closed
    ref = weakref.ref(held)
    sealed = immortal.seal()
    again = immortal.seal()
    module.TABLE["late"] = ["added after sealing"]
    module.LATE = ["a new global"]
    late = immortal.seal()
    count = ctypes.c_ssize_t.from_address(id(module.f))
    before = count.value
    holders = [module.f] * 100
    taken = count.value
    del holders
    module.TABLE["k"].append(3)  # sealed containers stay mutable
    out = {
        "sealed": sealed,
        "again": again,
        "late": late,
        # Reached only through sealed containers: left ordinary (immortal.py says why).
        "late_entry": immortal.is_sealed(module.TABLE["late"]),
        "late_global": immortal.is_sealed(module.LATE),
        "function": immortal.is_sealed(module.f),
        "code": immortal.is_sealed(module.f.__code__),
        "class": immortal.is_sealed(module.C),
        "method": immortal.is_sealed(module.C.m),
        "table": immortal.is_sealed(module.TABLE),
        "item": immortal.is_sealed(module.TABLE["k"]),
        "new_object": immortal.is_sealed(object()),
        "frame_local": immortal.is_sealed(held),
        "count_moved": taken != before or count.value != before,
        "still_works": module.f(1) == 2 and module.C().m() == 2 and module.TABLE["k"] == [1, 2, 3],
        "frozen": gc.get_freeze_count() > 0,
    }
    del held
    out["local_freed"] = ref() is None
    return out

print(json.dumps(check()))
"""


def _sealed_in_child(
    env_value: str | None, *, unsupported: bool = False
) -> tuple[dict[str, Any], str]:
    env = dict(os.environ)
    env.pop(immortal.SEAL_ENV, None)
    if env_value is not None:
        env[immortal.SEAL_ENV] = env_value
    if unsupported:
        env["TEST_AS_UNSUPPORTED"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout), done.stderr


# Sealing needs CPython 3.12/3.13 (the venvs `make test` runs warm tests on); on any
# other interpreter `seal()` must only freeze, and these tests check that instead.
SUPPORTED = immortal.supported()


def _assert_only_frozen(seen: dict[str, Any]) -> None:
    assert seen["sealed"] == 0
    assert seen["function"] is False
    assert seen["count_moved"] is True
    assert seen["still_works"] is True
    assert seen["frozen"] is True  # gc.freeze() still happens


def test_support_follows_the_interpreter() -> None:
    expected = (
        sys.implementation.name == "cpython"
        and sys.version_info[:2] in ((3, 12), (3, 13))
        and not sysconfig.get_config_var("Py_GIL_DISABLED")
        and not hasattr(sys, "getobjects")
    )
    assert immortal.supported() is expected


@pytest.mark.parametrize("value", [None, "", "1", " 1 "], ids=["unset", "empty", "1", "spaces"])
def test_seal_makes_what_modules_reach_immortal(value: str | None) -> None:
    seen, stderr = _sealed_in_child(value)
    assert stderr == ""
    if not SUPPORTED:
        _assert_only_frozen(seen)
        return
    assert seen["sealed"] > 1000  # the interpreter's own modules, and sealme
    assert seen["again"] == 0  # nothing new since: the walk stops at sealed objects
    assert seen["late"] == 0
    assert seen["late_entry"] is False
    assert seen["late_global"] is False
    for name in ("function", "code", "class", "method", "table", "item"):
        assert seen[name] is True, name
    assert seen["count_moved"] is False  # taking 100 references wrote nothing
    assert seen["still_works"] is True
    assert seen["new_object"] is False
    assert seen["frame_local"] is False  # the caller's own objects are left alone...
    assert seen["local_freed"] is True  # ...and freed when their last reference goes
    assert seen["frozen"] is True


@pytest.mark.parametrize(
    ("value", "unsupported"),
    [("0", False), (" 0", False), (None, True)],
    ids=["0", "0 with a space", "an interpreter without immortal objects"],
)
def test_off_or_unsupported_only_freezes(value: str | None, unsupported: bool) -> None:
    seen, stderr = _sealed_in_child(value, unsupported=unsupported)
    _assert_only_frozen(seen)
    assert seen["frame_local"] is False
    assert seen["local_freed"] is True
    assert stderr == ""


@pytest.mark.parametrize("value", ["yes", "off", "2"])
def test_a_bad_value_is_reported_and_sealing_stays_on(value: str) -> None:
    seen, stderr = _sealed_in_child(value)
    assert seen["function"] is SUPPORTED
    assert f"{immortal.SEAL_ENV}={value!r} is neither 0 nor 1" in stderr


def test_the_setting_is_read_once_at_import() -> None:
    # A primed child takes over a run's environment before it seals: the run's own
    # AO_WARM_SEAL must not decide for it; the helper's, read at import, does.
    code = (
        "import os\n"
        "from ansible_operator.warm import immortal\n"
        f"os.environ[{immortal.SEAL_ENV!r}] = '0'\n"
        "print(immortal.seal() > 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != immortal.SEAL_ENV}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == str(SUPPORTED)
