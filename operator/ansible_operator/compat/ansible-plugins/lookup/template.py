"""`lookup('template', ...)` as ansible-core 2.18 returned it: '' for a template that
renders nothing, not None.

Loaded by Ansible, never by the operator: the 2.18-compatibility mode
(ansible_operator.compat.mode) puts this directory first on ANSIBLE_LOOKUP_PLUGINS
when the installed ansible-core is 2.19 or later, so the short name `template`
resolves here (`ansible.builtin.template` still names the built-in plugin). From 2.19
on, a template that renders to nothing gives None, and `| indent` (or `+`, `| length`)
on it fails: "unsupported operand type(s) for +=: 'NoneType' and 'str'". 2.18 gave an
empty string. Every value is rendered by the built-in plugin; only None is replaced,
and each replacement is reported as a deprecation with the marker the operator
counts (compat.notices), so the role's author sees where it happened.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.loader import lookup_loader
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

# compat.notices matches this prefix to count the notice as one the mode hid.
MARKER = "[ansible-operator compat: empty-template-lookup]"

display = Display()


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        # The built-in plugin, with its own option definitions (this file has none).
        builtin = lookup_loader.get(
            "ansible.builtin.template", loader=self._loader, templar=self._templar
        )
        rendered = builtin.run(terms, variables, **kwargs)
        result = []
        for term, value in zip(terms, rendered, strict=False):
            if value is not None:
                result.append(value)
            else:
                display.deprecated(
                    f"{MARKER} lookup('template', '{term}') rendered nothing: "
                    "ansible-core 2.19 and later give None, 2.18 gave ''. The 2.18 "
                    "compatibility mode returns ''; write "
                    f"`lookup('template', '{term}') | default('', true)` to port.",
                    version="2.23",
                )
                result.append("")
        return result
