"""`molecule test` (scenario molecule/default) passes against the testbed's real node.

Runs the scenario exactly as a user would, as a subprocess, with .venv/bin
first on PATH and KUBECONFIG pointing at the cluster the other tests use; its
namespace sends every pod to the real node (TEST_NAMESPACE_ANNOTATIONS), the
operator gets the testbed's images (RELATED_IMAGE_*), and verify also checks
what really runs (TEST_REAL_PODS). tests/examples checks the same roles on
kwok's nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.node_config import REAL_NODE_NAMESPACE_ANNOTATIONS
from tests.realnode.support import RELATED_IMAGES

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]
REPO = Path(__file__).resolve().parents[2]


# Every sample's pods really run, and the machine is shared: more than
# pytest's default 600 s per test.
@pytest.mark.timeout(1800)
def test_molecule_default_scenario(
    kubeconfig_path: Path, real_node: dict[str, object], tmp_path: Path
) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(kubeconfig_path),
        "TEST_OPERATOR_NAMESPACE": f"molecule-{os.getpid()}",
        "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "molecule"),
        "TEST_NAMESPACE_ANNOTATIONS": json.dumps(REAL_NODE_NAMESPACE_ANNOTATIONS),
        "TEST_REAL_PODS": "true",
        **RELATED_IMAGES,
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
    assert "SampleDB answers a query" in output
