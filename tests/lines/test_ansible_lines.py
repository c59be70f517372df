"""What differs between the Ansible lines (README "Which Ansible", docs/porting.md).

Runs on whichever ansible-core this virtualenv has: `make test` runs it on the default
line and again on the other one (`make test-line`). Each case says what happens on the
ansible-core 2.18 line (the Go operator's image) and from 2.19 on (data tagging), so
the same table fails on either line if that line stops behaving as documented. The
playbooks run with this venv's `ansible-playbook` and kubernetes.core, against the
testbed for the ConfigMap cases.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from ansible.release import __version__ as ANSIBLE_CORE

from ansible_operator.config import defaults
from ansible_operator.warm import supervisor

VENV_BIN = Path(sys.executable).parent
LINE = tuple(int(part) for part in ANSIBLE_CORE.split(".")[:2])
TAGGED = LINE >= (2, 19)
"""ansible-core 2.19 and later: a template's result keeps its native type, and
conditionals must be booleans."""
UNMARSHAL = "cannot unmarshal number into Go struct field ConfigMap.data of type string"
NOT_BOOLEAN = "Conditionals must have a boolean result"
NOT_BOOLEAN_218 = "Conditional results must be True or False"


def run_playbook(
    tmp_path: Path,
    tasks: str,
    *,
    extra_env: dict[str, str] | None = None,
    extra_vars: dict[str, object] | None = None,
) -> subprocess.CompletedProcess[str]:
    play_vars = {"replicas": "2", "previous": "0", **(extra_vars or {})}
    (tmp_path / "playbook.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n"
        f"  vars: {json.dumps(play_vars)}\n"
        f"  tasks:\n{tasks}"
    )
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "AO_WARM"))
    }
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="false",
        **(extra_env or {}),
    )
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "playbook.yml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@dataclass(frozen=True)
class ConfigMapCase:
    count: str
    """The template for `data.count`, as a role written for the Go operator has it."""
    fails_when_tagged: bool


CONFIGMAP_CASES = {
    # The Operator SDK sample's ReconciliationTest: an int on 2.19+, so the API server
    # answers 422.
    "arithmetic result": ConfigMapCase("{{ (previous | int) + 1 }}", fails_when_tagged=True),
    # docs/porting.md's fix: a string on every line.
    "arithmetic result | string": ConfigMapCase(
        "{{ ((previous | int) + 1) | string }}", fails_when_tagged=False
    ),
    # Already a string: unchanged by data tagging.
    "string concatenation": ConfigMapCase("{{ previous }}1", fails_when_tagged=False),
}


@pytest.mark.cluster
@pytest.mark.parametrize("case", CONFIGMAP_CASES.values(), ids=CONFIGMAP_CASES.keys())
def test_a_templated_configmap_value(
    tmp_path: Path, kubeconfig_path: Path, namespace: str, api_client: object, case: ConfigMapCase
) -> None:
    from kubernetes import client  # noqa: PLC0415 - only cluster tests pay for it

    definition = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "counter", "namespace": namespace},
        "data": {"count": case.count},
    }
    tasks = (
        "    - name: Count\n      kubernetes.core.k8s:\n"
        f"        kubeconfig: {kubeconfig_path}\n"
        f"        definition: {json.dumps(definition)}\n"
    )
    proc = run_playbook(tmp_path, tasks)
    output = proc.stdout + proc.stderr

    if TAGGED and case.fails_when_tagged:
        assert proc.returncode != 0, output
        assert UNMARSHAL in output, output
        return
    assert proc.returncode == 0, output
    created = client.CoreV1Api(api_client).read_namespaced_config_map("counter", namespace)
    assert created.data == {"count": "01" if "}}1" in case.count else "1"}


REPLICAS_CASES = {
    # A string on 2.18 (a template with a filter), a number from 2.19 on.
    "size | int": ("{{ size | int }}", True),
    # docs/porting.md's form for both lines: the variable alone keeps its type.
    "size": ("{{ size }}", False),
}


@pytest.mark.cluster
@pytest.mark.parametrize(("replicas", "fails_on_218"), REPLICAS_CASES.values(), ids=REPLICAS_CASES)
def test_a_templated_deployment_replicas(
    tmp_path: Path,
    kubeconfig_path: Path,
    namespace: str,
    api_client: object,
    replicas: str,
    fails_on_218: bool,
) -> None:
    from kubernetes import client  # noqa: PLC0415 - only cluster tests pay for it

    labels = {"app": "lines"}
    definition = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "lines", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    tasks = (
        "    - name: Deploy\n      kubernetes.core.k8s:\n"
        f"        kubeconfig: {kubeconfig_path}\n"
        f"        definition: {json.dumps(definition)}\n"
    )
    proc = run_playbook(tmp_path, tasks, extra_vars={"size": 2})
    output = proc.stdout + proc.stderr

    if fails_on_218 and not TAGGED:
        assert proc.returncode != 0, output
        assert "cannot unmarshal string into Go struct field" in output, output
        return
    assert proc.returncode == 0, output
    created = client.AppsV1Api(api_client).read_namespaced_deployment("lines", namespace)
    assert created.spec.replicas == 2


@dataclass(frozen=True)
class ConditionalCase:
    when: str
    strict: bool
    """With ANSIBLE_ALLOW_BROKEN_CONDITIONALS=false: docs/porting.md's way to find, on
    ansible-core 2.18, the conditionals 2.19+ rejects."""
    fails_on_218: bool
    fails_when_tagged: bool


CONDITIONAL_CASES = {
    "a string": ConditionalCase("replicas", False, fails_on_218=False, fails_when_tagged=True),
    "a string, strict": ConditionalCase(
        "replicas", True, fails_on_218=True, fails_when_tagged=True
    ),
    "a comparison": ConditionalCase(
        "replicas | int > 1", False, fails_on_218=False, fails_when_tagged=False
    ),
    "a comparison, strict": ConditionalCase(
        "replicas | int > 1", True, fails_on_218=False, fails_when_tagged=False
    ),
    "a length test": ConditionalCase(
        "replicas | length > 0", True, fails_on_218=False, fails_when_tagged=False
    ),
}


@pytest.mark.parametrize("case", CONDITIONAL_CASES.values(), ids=CONDITIONAL_CASES.keys())
def test_a_conditional(tmp_path: Path, case: ConditionalCase) -> None:
    tasks = f'    - name: Maybe\n      debug:\n        msg: ran\n      when: "{case.when}"\n'
    strict = {"ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "false"} if case.strict else {}
    proc = run_playbook(tmp_path, tasks, extra_env=strict)
    output = proc.stdout + proc.stderr

    if case.fails_when_tagged if TAGGED else case.fails_on_218:
        assert proc.returncode != 0, output
        assert (NOT_BOOLEAN if TAGGED else NOT_BOOLEAN_218) in output, output
        return
    assert proc.returncode == 0, output
    assert '"msg": "ran"' in output, output


def test_warm_ansible_runs_only_on_the_lines_it_was_checked_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On another line the operator says so once and every run starts cold."""
    caplog.set_level(logging.INFO, logger=supervisor.__name__)
    servers = supervisor.start_warm_servers(enabled=True, runner_root=tmp_path, eager=True)
    try:
        if f"{LINE[0]}.{LINE[1]}" in defaults.WARM_ANSIBLE_CORE_LINES:
            assert servers is not None, caplog.text
            assert set(servers.pids()) == {"playbook", "module"}, caplog.text
        else:
            assert servers is None
            assert f"Warm Ansible is off: ansible-core {ANSIBLE_CORE} is not a line" in caplog.text
    finally:
        if servers is not None:
            servers.stop()
