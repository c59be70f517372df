"""Test lookup (runs in the Ansible worker): is the run child's `__main__` frozen?

The `__main__` module of `ansible-playbook` is created by the run child itself (after
it was forked from a warm server or a primed child), so its dict is frozen in a worker
only if the run child called `gc.freeze()` before forking it (warm/pbserver.py).
Frozen objects are in the collector's permanent generation, which `gc.get_objects()`
does not list.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        namespace = vars(sys.modules["__main__"])
        return [not any(obj is namespace for obj in gc.get_objects())]
