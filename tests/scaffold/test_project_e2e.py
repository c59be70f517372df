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


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, kubeconfig_path: Path, domain: str) -> Path:
    root = tmp_path_factory.mktemp("project") / "memcached-operator"
    root.mkdir()
    env = user_env(kubeconfig_path)
    operator = str(BIN / "ansible-operator")
    run(
        [
            operator,
            "init",
            f"--domain={domain}",
            "--group",
            GROUP,
            "--version",
            VERSION,
            "--kind",
            "Memcached",
            "--generate-role",
        ],
        cwd=root,
        env=env,
    )
    run(
        [
            operator,
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
