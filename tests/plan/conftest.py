"""Fixtures of the plan tests: the plan project's CRDs, and `ansible-operator plan` runs.

`plan_cli(*args)` runs the real command as a process, from the plan project
(tests/plan/project) against the testbed, and returns the finished process.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import OPERATOR, apply_crds

PROJECT = Path(__file__).parent / "project"
GROUP, VERSION = "plan.e2e.example.com", "v1alpha1"

PlanCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def plan_crds(api_client: Any) -> list[str]:
    docs = yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text())
    return apply_crds(api_client, docs, what="plan")


@pytest.fixture
def plan_cli(kubeconfig_path: Path, plan_crds: list[str]) -> PlanCli:
    def run(*args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig_path)}
        return subprocess.run(
            [OPERATOR, "plan", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    return run
