"""`lookup('template', ...)` as ansible-core 2.18 returned it for a template that
renders nothing: the template file's trailing newlines ('' when it has none), not None.

Loaded by Ansible, never by the operator: the 2.18-compatibility mode
(ansible_operator.compat.mode) puts this directory first on ANSIBLE_LOOKUP_PLUGINS
when the installed ansible-core is 2.19 or later, so the short name `template`
resolves here (`ansible.builtin.template` still names the built-in plugin). From 2.19
on, a template that renders to nothing gives None, and `| indent` (or `+`, `| length`)
on it fails: "unsupported operand type(s) for +=: 'NoneType' and 'str'", and a
`k8s` task given it as `definition` fails ("'NoneType' object is not callable"). 2.18
rendered with its trailing newlines preserved, so such a template gave '' or '\n'
(AWX's optional resources end with `{% endif %}` and a newline: kubernetes.core reads
'\n' as no object, but '' as no definition at all). Every value is rendered by the
built-in plugin; only None is replaced, and each replacement is reported as a
deprecation with the marker the operator counts (compat.notices), so the role's
author sees where it happened.
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
                result.append(self._trailing_newlines(term, variables))
                display.deprecated(
                    f"{MARKER} lookup('template', '{term}') rendered nothing: "
                    "ansible-core 2.19 and later give None, 2.18 gave '' (or the "
                    "template's trailing newlines), which the 2.18 compatibility mode returns. "
                    f"To port, handle the empty case: `lookup('template', '{term}') | "
                    "default('', true)`, or a `when:` on a k8s task whose definition it is.",
                    version="2.23",
                )
        return result

    def _trailing_newlines(self, term: Any, variables: Any) -> str:
        """What 2.18 made of an empty render: the source's trailing newlines."""
        path = self.find_file_in_search_path(variables, "templates", term)
        source = self._loader.get_text_file_contents(path) if path else ""
        return "\n" * (len(source) - len(source.rstrip("\n")))
