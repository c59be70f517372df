"""Test lookup (runs in the Ansible worker): are the controller's imported functions
sealed, i.e. immortal, so that using them writes nothing to shared pages?

`TaskExecutor.run` is imported before the fork in a primed child, which seals what its
modules reach (warm/immortal.py); in a cold `ansible-playbook` it is an ordinary object.
The reference count is read directly: the object is immortal when its low 32 bits,
read as a signed int, are negative (CPython 3.12/3.13, 64-bit).
"""

from __future__ import annotations

import ctypes
from typing import Any

from ansible.executor.task_executor import TaskExecutor
from ansible.plugins.lookup import LookupBase


def _sealed(obj: object) -> bool:
    count = ctypes.c_ssize_t.from_address(id(obj)).value
    return ctypes.c_int32(count & 0xFFFFFFFF).value < 0


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        return [_sealed(TaskExecutor.run) and _sealed(TaskExecutor.run.__code__)]
