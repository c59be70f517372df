"""A scaffolded project works on a real cluster, as a new user would use it.

One project per module, written by the real `ansible-operator` command: init
with a role-based kind (Memcached) plus `create api` for a playbook-based
one (Backup), in a domain of its own so that its CRDs clash with nothing.
Then, against the session's cluster: `make install` applies the CRDs, `make
run` (our ansible-operator first on PATH) reconciles both samples to
Successful and stops cleanly on SIGTERM, and the generated molecule/default
scenario passes.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.probes import wait_until
from tests.scaffold.conftest import kubectl_binary

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
BIN = Path(sys.executable).parent
GROUP, VERSION = "cache", "v1alpha1"
KINDS = {"Memcached": "memcacheds", "Backup": "backups"}
README = Path(__file__).resolve().parents[2] / "README.md"


def free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def user_env(kubeconfig: Path, **extra: str) -> dict[str, str]:
    """A user's shell: our venv first on PATH (ansible-operator, molecule), then kubectl's directory."""
    path = os.pathsep.join(
        [str(BIN), str(Path(kubectl_binary()).parent), os.environ.get("PATH", "")]
    )
    return {**os.environ, "PATH": path, "KUBECONFIG": str(kubeconfig), **extra}


def run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def domain() -> str:
    return f"s{uuid.uuid4().hex[:6]}.scaffold.test"


def readme_block() -> str:
    """The sh block of README.md's "Start a new operator", continuation lines joined."""
    text = README.read_text()
    section = text[text.index("## Start a new operator") :]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert block, "README.md: no sh block under 'Start a new operator'"
    return block.group(1).replace("\\\n", " ")


def readme_init(domain: str, project_name: str) -> list[str]:
    """The README's `ansible-operator init` line, in a domain and with a project name of our own."""
    line = next(ln for ln in readme_block().splitlines() if ln.startswith("ansible-operator init"))
    argv = shlex.split(line.split("  #")[0])
    argv[argv.index("--domain") + 1] = domain
    return [str(BIN / "ansible-operator"), *argv[1:], f"--project-name={project_name}"]


def test_the_readme_runs_what_these_tests_run() -> None:
    block = readme_block()
    for command in ("make install run", "kubectl apply -k config/samples", "molecule test"):
        assert f"\n{command} " in block, command
    assert readme_init("d.test", "p")[1:7] == [
        "init",
        "--domain",
        "d.test",
        "--group",
        "cache",
        "--version",
    ]


@pytest.fixture(scope="module")
def project_name() -> str:
    return f"memcached-operator-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def project(
    tmp_path_factory: pytest.TempPathFactory, kubeconfig_path: Path, domain: str, project_name: str
) -> Path:
    """README's init (Memcached with a role), then `create api` for Backup with a playbook."""
    root = tmp_path_factory.mktemp("project") / "memcached-operator"
    root.mkdir()
    env = user_env(kubeconfig_path)
    run(readme_init(domain, project_name), cwd=root, env=env)
    run(
        [
            str(BIN / "ansible-operator"),
            "create",
            "api",
            "--group",
            GROUP,
            "--version",
            VERSION,
            "--kind",
            "Backup",
            "--generate-playbook",
        ],
        cwd=root,
        env=env,
    )
    return root


@pytest.fixture(scope="module")
def installed(project: Path, kubeconfig_path: Path) -> Iterator[str]:
    env = user_env(kubeconfig_path)
    output = run(["make", "install", f"KUBECTL={kubectl_binary()}"], cwd=project, env=env)
    yield output
    run(
        ["make", "uninstall", "ignore-not-found=true", f"KUBECTL={kubectl_binary()}"],
        cwd=project,
        env=env,
    )


def crd_established(api_client: Any, name: str) -> bool:
    try:
        crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(name)
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def test_make_install_applies_the_crds(installed: str, api_client: Any, domain: str) -> None:
    for plural in KINDS.values():
        name = f"{plural}.{GROUP}.{domain}"
        assert f"customresourcedefinition.apiextensions.k8s.io/{name}" in installed
        wait_until(
            f"CRD {name} established", lambda n=name: crd_established(api_client, n), timeout=30
        )


def successful(api_client: Any, domain: str, namespace: str, plural: str, name: str) -> bool:
    try:
        obj = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            f"{GROUP}.{domain}", VERSION, namespace, plural, name
        )
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Successful" and c.get("status") == "True" for c in conditions)


def health_ok(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


def test_make_run_reconciles_the_samples(
    project: Path,
    installed: str,
    kubeconfig_path: Path,
    api_client: Any,
    domain: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    port = free_port()
    run_args = (
        f"--health-probe-bind-address=127.0.0.1:{port} --metrics-bind-address=0 "
        f"--user-metrics-bind-address=0 --proxy-port=0 --runner-dir={tmp_path / 'runner'}"
    )
    log_path = tmp_path / "make-run.log"
    env = user_env(kubeconfig_path, WATCH_NAMESPACE=namespace)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "run", f"RUN_ARGS={run_args}"],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            "operator ready", lambda: health_ok(port), timeout=60, alive=lambda: proc.poll() is None
        )
        run(
            [kubectl_binary(), "apply", "-n", namespace, "-k", "config/samples"],
            cwd=project,
            env=env,
        )
        for kind, plural in KINDS.items():
            name = f"{kind.lower()}-sample"
            wait_until(
                f"{kind} {name} Successful",
                lambda p=plural, n=name: successful(api_client, domain, namespace, p, n),
                timeout=120,
                alive=lambda: proc.poll() is None,
            )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    log = log_path.read_text(errors="replace")
    # the command make ran
    assert "ANSIBLE_ROLES_PATH=" in log
    assert " run --health-probe-bind-address" in log
    assert '"msg":"Exiting."' in log, log[-3000:]


def test_the_generated_molecule_scenario_passes(
    project: Path, kubeconfig_path: Path, tmp_path: Path
) -> None:
    env = user_env(
        kubeconfig_path,
        TEST_OPERATOR_NAMESPACE=f"scaffold-molecule-{uuid.uuid4().hex[:6]}",
        MOLECULE_EPHEMERAL_DIRECTORY=str(tmp_path / "molecule"),
    )
    output = run([str(BIN / "molecule"), "test"], cwd=project, env=env, timeout=900)
    for test in ("memcached_test.yml", "backup_test.yml"):
        assert test in output, output[-3000:]


def deployment(api_client: Any, namespace: str, name: str) -> Any:
    try:
        return client.AppsV1Api(api_client).read_namespaced_deployment(name, namespace)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def test_make_deploy_and_undeploy(
    project: Path, project_name: str, kubeconfig_path: Path, api_client: Any
) -> None:
    env = user_env(kubeconfig_path)
    image = "registry.example.com/memcached-operator:v0.0.1"
    namespace, name = f"{project_name}-system", f"{project_name}-controller-manager"
    run(["make", "deploy", f"IMG={image}", f"KUBECTL={kubectl_binary()}"], cwd=project, env=env)
    try:
        found = deployment(api_client, namespace, name)
        assert found is not None
        container = found.spec.template.spec.containers[0]
        assert container.image == image
        assert f"--leader-election-id={project_name}" in container.args
        assert found.spec.template.spec.service_account_name == name
    finally:
        run(
            ["make", "undeploy", "ignore-not-found=true", f"KUBECTL={kubectl_binary()}"],
            cwd=project,
            env=env,
        )
    wait_until(
        f"deployment {name} gone",
        lambda: deployment(api_client, namespace, name) is None,
        timeout=120,
    )
