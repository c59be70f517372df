"""The package's shape rules (docs/architecture.md, "How the code is written"): no two
modules share a name, modules stay under 400 lines and functions under 60, unless the
module's docstring says why ("Over 400 lines on purpose: ...")."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "ansible_operator"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
REASON = "Over 400 lines on purpose:"


def _modules() -> list[Path]:
    # ansible-plugins/ holds plugins Ansible loads by their own names (compat/).
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "ansible-plugins" not in p.parts]


def test_no_two_modules_share_a_name() -> None:
    names = collections.Counter(p.name for p in _modules() if p.name != "__init__.py")
    assert sorted(name for name, count in names.items() if count > 1) == []


def test_long_modules_say_why_and_functions_stay_short() -> None:
    long_modules, long_functions = [], []
    for path in _modules():
        text = path.read_text()
        tree = ast.parse(text)
        if len(text.splitlines()) > MAX_MODULE_LINES and REASON not in (
            ast.get_docstring(tree) or ""
        ):
            long_modules.append(str(path.relative_to(PACKAGE)))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(PACKAGE)}:{node.name} ({length})")
    assert long_modules == []
    assert long_functions == []
