"""The operator's start-up imports none of the kubernetes client's generated API
classes (issue 11: `CoreV1Api` alone costs about 21 MiB in the operator process)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("entry", ["ansible_operator.cli", "ansible_operator.controller.manager"])
def test_no_generated_api_class_is_imported(entry: str) -> None:
    code = (
        f"import sys, {entry}\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('kubernetes.client.api.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == []
