"""Test lookup (runs in the Ansible worker): the run's configuration, and its process tree.

Returns every setting of `ansible.constants` (as text), the config file Ansible chose,
and the process names above the run child: worker -> run child -> keeper -> the
process that forked the keeper ("ao-primed" for a primed child, warm/primed.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ansible.plugins.lookup import LookupBase


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def _name(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as handle:
        return handle.read().strip()


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        constants = sys.modules["ansible.constants"]
        definitions = constants.config.get_configuration_definitions()
        settings = {name: str(getattr(constants, name, None)) for name in definitions}
        run_child = _parent(os.getpid())
        keeper = _parent(run_child)
        return [
            {
                "settings": settings,
                "config_file": str(constants.config._config_file),
                "run_child_pid": run_child,
                "keeper_comm": _name(keeper),
                "keeper_parent_comm": _name(_parent(keeper)),
                "keeper_parent_pid": _parent(keeper),
                "cache_env": os.environ.get("ANSIBLE_CACHE_PLUGIN_CONNECTION", ""),
            }
        ]
