"""Test lookup (runs in the Ansible worker): is `ansible.constants`' namespace frozen?

`ansible.constants` is first imported by the run itself (never by the warm playbook
helper), so its module dict is frozen in a worker only if the run child called
`gc.freeze()` before forking it (warm/pbserver.py). Frozen objects are in the
collector's permanent generation, which `gc.get_objects()` does not list.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        namespace = vars(sys.modules["ansible.constants"])
        return [not any(obj is namespace for obj in gc.get_objects())]
