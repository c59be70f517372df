"""What `ansible-operator run` imports before it is ready: not what only a run, a drift
check or another sub-command needs (issue 28, "a light operator process").

Each check runs a fresh interpreter and reads its `sys.modules`, so an eager import
re-added anywhere on the way (a module-level `import ansible_runner`, a helper
imported "just in case") fails here, with the chain that pulled it in. Timings are
not asserted (machines are noisy): `bench/startup.py` measures them.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The modules `run` needs before it is ready: the command line, the manager (and
# through it the wiring, kopf, the kube client, the servers), and what cli._run
# imports when `run` is the command.
RUN_PATH = (
    "ansible_operator.cli",
    "ansible_operator.controller.manager",
    "ansible_operator.observability.logging",
    "ansible_operator.warm.malloc",
)

# Imported when they are first needed, never at start-up; the comment says when.
NOT_AT_START = (
    # Never, unless a kubeconfig's user has an exec plugin or an auth provider
    # (kube/librarylogin.py): kube/ talks HTTP itself, and kopf is imported without
    # it (controller/kopfimport.py). With it came these, for nothing:
    "kubernetes",
    "pydantic",
    "requests",
    "oauthlib",
    "websocket",
    "multiprocessing",
    "ansible_runner",  # the first Ansible run (runner/ansible.py)
    "pexpect",  # with ansible-runner
    "ptyprocess",  # with ansible-runner (runner/ptyreap.py)
    "ansible_operator.plan.engine",  # the first drift check (controller/wiring.py)
    "ansible_operator.plan.changes",  # with the engine
    "ansible_operator.plan.journal",  # with the engine
    "ansible_operator.plan.command",  # `ansible-operator plan`
    "ansible_operator.scaffold.commands",  # `init`, `create api`
    "ansible_operator.scaffold.writer",  # with the scaffold's commands
)

# Modules of the command line alone: `version`, `validate`, `init` must not load
# the operator.
NOT_WITH_THE_COMMAND_LINE = (
    "ansible_operator.controller.manager",
    "kopf",
    "kubernetes",
    "prometheus_client",
)

# Imports the modules named, then, given a kubeconfig, logs in as `run` does (the
# Kube and kopf's connection fields), without a request.
_PROBE = """
import json, os, sys
for name in sys.argv[1:]:
    __import__(name)
if os.environ.get("PROBE_KUBECONFIG"):
    from ansible_operator.kube.client import Kube, load_login
    Kube(load_login(os.environ["PROBE_KUBECONFIG"])).login_fields()
print(json.dumps(sorted(sys.modules)))
"""


def _environment(kubeconfig: Path | None) -> dict[str, str]:
    return {**os.environ, "PROBE_KUBECONFIG": str(kubeconfig or "")}


def loaded_by(*modules: str, kubeconfig: Path | None = None) -> set[str]:
    """The modules a fresh interpreter holds after importing `modules` (and logging in
    with `kubeconfig`)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=_environment(kubeconfig),
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def importer_chain(module: str, *modules: str, kubeconfig: Path | None = None) -> str:
    """Who imported `module` (python -X importtime's nesting), for the failure message."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _PROBE, *modules],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=_environment(kubeconfig),
    )
    rows = []
    for line in done.stderr.splitlines():
        _, _, name = line.rpartition("|")
        if line.startswith("import time:") and name.strip():
            rows.append((len(name) - len(name.lstrip()), name.strip()))
    for index, (found_at, name) in enumerate(rows):
        if name != module:
            continue
        chain, depth = [name], found_at
        for outer, parent in rows[index + 1 :]:  # importtime lists a parent after its imports
            if outer < depth:
                chain.append(parent)
                depth = outer
        return " <- ".join(chain)
    return f"{module}: importer not found"


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig like the testbed's: embedded CA, client certificate and key."""
    data = base64.b64encode(b"-----PEM-----\n").decode()
    path = tmp_path_factory.mktemp("login") / "kubeconfig"
    path.write_text(
        json.dumps(  # JSON is YAML
            {
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "certificate-authority-data": data,
                        },
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {"client-certificate-data": data, "client-key-data": data},
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def run_path(kubeconfig: Path) -> set[str]:
    return loaded_by(*RUN_PATH, kubeconfig=kubeconfig)


@pytest.mark.parametrize("module", NOT_AT_START)
def test_the_run_path_does_not_import(run_path: set[str], kubeconfig: Path, module: str) -> None:
    assert module not in run_path, importer_chain(module, *RUN_PATH, kubeconfig=kubeconfig)


@pytest.mark.parametrize("module", NOT_WITH_THE_COMMAND_LINE)
def test_the_command_line_alone_does_not_import(module: str) -> None:
    assert module not in loaded_by("ansible_operator.cli"), importer_chain(
        module, "ansible_operator.cli"
    )


def test_the_probe_sees_what_the_run_path_needs(run_path: set[str]) -> None:
    # Guards the guard: were the probe to import nothing, or not log in, every test
    # above would pass.
    needed = {
        "kopf",
        "ansible_operator.controller.wiring",
        "ansible_operator.runner.ansible",
        "ansible_operator.kube.kubeconfig",
    }
    assert needed <= run_path
