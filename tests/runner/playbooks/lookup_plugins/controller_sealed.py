"""Test lookup (runs in the Ansible worker): are the controller's imported functions
sealed, i.e. immortal, so that using them writes nothing to shared pages?

`TaskExecutor.run` is imported before the fork in a primed child, which seals what its
modules reach (warm/immortal.py); in a cold `ansible-playbook` it is an ordinary object.
"""

from __future__ import annotations

from typing import Any

from ansible.executor.task_executor import TaskExecutor
from ansible.plugins.lookup import LookupBase

from ansible_operator.warm.immortal import is_sealed


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        return [is_sealed(TaskExecutor.run) and is_sealed(TaskExecutor.run.__code__)]
