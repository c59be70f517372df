"""The pre-import rules, proven in a fresh interpreter for the installed versions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ansible_operator.warm.preimports import (
    MODULE_FORBIDDEN,
    MODULE_PREIMPORTS,
    PLAYBOOK_FORBIDDEN,
    PLAYBOOK_PREIMPORTS,
)

REPO = Path(__file__).resolve().parents[3]


def import_in_fresh_interpreter(names: tuple[str, ...]) -> dict[str, list[str]]:
    code = (
        "import json, sys\n"
        "failed = []\n"
        f"for name in {list(names)!r}:\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except Exception:\n"
        "        failed.append(name)\n"
        "print(json.dumps({'loaded': sorted(sys.modules), 'failed': failed}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd="/"
    ).stdout
    result: dict[str, list[str]] = json.loads(out)
    return result


def test_the_playbook_helpers_imports_leave_ansible_constants_alone() -> None:
    result = import_in_fresh_interpreter(PLAYBOOK_PREIMPORTS)
    assert [name for name in PLAYBOOK_FORBIDDEN if name in result["loaded"]] == []
    assert not any(name.startswith("ansible_collections") for name in result["loaded"])
    assert result["failed"] == []
    assert {"jinja2", "yaml", "ansible.config.manager"} <= set(result["loaded"])


def test_the_module_servers_imports_are_module_side_only() -> None:
    result = import_in_fresh_interpreter(MODULE_PREIMPORTS)
    assert [name for name in MODULE_FORBIDDEN if name in result["loaded"]] == []
    assert result["failed"] == []
    assert {"ansible.module_utils.basic", "kubernetes.client"} <= set(result["loaded"])


def test_a_server_refuses_to_start_when_a_forbidden_module_was_imported(tmp_path: Path) -> None:
    code = (
        "from ansible_operator.warm import bootstrap\n"
        "bootstrap.start(['--socket', 'x'], preimports=['ansible.constants'],"
        " forbidden=['ansible.constants'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode != 0
    assert "WarmStartError: refusing to serve: pre-imports loaded ansible.constants" in proc.stderr
