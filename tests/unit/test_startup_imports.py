"""What `ansible-operator run` imports before it is ready: not what only a run, a drift
check or another sub-command needs (issue 28, "a light operator process").

Each check runs a fresh interpreter and reads its `sys.modules`, so an eager import
re-added anywhere on the way (a module-level `import ansible_runner`, a helper
imported "just in case") fails here, with the chain that pulled it in. Timings are
not asserted (machines are noisy): `bench/startup.py` measures them.
"""

from __future__ import annotations

import json
import subprocess
import sys

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

_PROBE = """
import json, sys
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(*modules: str) -> set[str]:
    """The modules a fresh interpreter holds after importing `modules`."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return set(json.loads(done.stdout))


def importer_chain(module: str, *modules: str) -> str:
    """Who imported `module` (python -X importtime's nesting), for the failure message."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _PROBE, *modules],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
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
def run_path() -> set[str]:
    return loaded_by(*RUN_PATH)


@pytest.mark.parametrize("module", NOT_AT_START)
def test_the_run_path_does_not_import(run_path: set[str], module: str) -> None:
    assert module not in run_path, importer_chain(module, *RUN_PATH)


@pytest.mark.parametrize("module", NOT_WITH_THE_COMMAND_LINE)
def test_the_command_line_alone_does_not_import(module: str) -> None:
    assert module not in loaded_by("ansible_operator.cli"), importer_chain(
        module, "ansible_operator.cli"
    )


def test_the_probe_sees_what_the_run_path_needs(run_path: set[str]) -> None:
    # Guards the guard: were the probe to import nothing, every test above would pass.
    assert {"kopf", "ansible_operator.controller.wiring", "ansible_operator.runner.ansible"} <= (
        run_path
    )
