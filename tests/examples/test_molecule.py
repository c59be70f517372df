"""`molecule test` (scenario molecule/default) passes against the session's cluster.

Runs the scenario exactly as a user would, as a subprocess, with .venv/bin
first on PATH and KUBECONFIG pointing at the cluster the other tests use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_molecule_default_scenario(kubeconfig_path: Path, tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(kubeconfig_path),
        "TEST_OPERATOR_NAMESPACE": f"molecule-{os.getpid()}",
        "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "molecule"),
    }
    done = subprocess.run(
        [str(Path(bin_dir) / "molecule"), "test"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    for step in ("converge", "idempotence", "verify", "destroy"):
        assert f"{step}" in output
