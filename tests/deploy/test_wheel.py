"""`pip install` of the built wheel is all a user needs, and an SDK project's `make run` runs it.

The wheel and sdist are built and checked by scripts/build_dist.py (what
`make dist` runs); the wheel is installed into a fresh virtualenv of the default line's Python
with pip, dependencies pinned by requirements/constraints.txt and taken from
the index through pip's cache. Everything then runs outside the checkout,
with a fresh HOME, the virtualenv first on PATH and no ANSIBLE_* variables,
so nothing of the repository can be found by accident:

* `ansible-operator version` works, the package is the installed one, and the
  operator_sdk.util collection is found by Ansible in the wheel's
  site-packages (a check-mode play of operator_sdk.util.requeue_after);
* the SDK project of tests/deploy/sdk_project gets its collections the way
  docs/migrating.md says (`ansible-galaxy collection install -r
  requirements.yml`, from the local Galaxy stand-in of tests/deploy/galaxy.py),
  then its own Makefile's `make run` (which runs the first `ansible-operator`
  on PATH, with the Go operator's default ports) reconciles its sample on the
  test cluster, with the project's kubernetes.core from ~/.ansible/collections.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import galaxy, sdkproject, support
from tests.deploy.replay import find_python

pytestmark = [pytest.mark.slow]

DEFAULT_PORTS = (6789, 8443, 8888, 5050)  # probes, metrics, API proxy, user metrics: `run` alone
RUNNER_DIR = Path("/tmp/ansible-operator/runner")  # --runner-dir's default


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        """A user's shell: the virtualenv first on PATH, a fresh HOME, no ANSIBLE_* variables."""
        path = f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
        return {"PATH": path, "HOME": str(self.home), "LANG": "C.UTF-8", **extra}

    def run(self, *argv: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        env = self.env(**extra)
        result = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert result.returncode == 0, f"{argv}: {result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            str(support.REPO / "scripts" / "build_dist.py"),
            f"--out={base / 'dist'}",
            f"--cache={_cache_home() / 'ansible-operator-dist-tools'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = Path(built.stdout.split()[0])
    # The default line's pins (requirements/constraints.txt) are made for this Python.
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = find_python(version, for_others=False)
    assert python is not None, f"no python{version} on PATH or in pyenv's installs"
    venv = base / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    constraints = support.REPO / "requirements" / "constraints.txt"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(constraints)]
    subprocess.run([*pip, str(wheel)], check=True, timeout=900)
    home = base / "home"
    home.mkdir()
    return Installed(venv, wheel, home)


def test_the_wheel_gives_the_command_and_the_collection(
    installed: Installed, tmp_path: Path
) -> None:
    version = installed.run("ansible-operator", "version", cwd=tmp_path).stdout
    assert "0.1.0" in version, version
    where = installed.run(
        "python", "-c", "import ansible_operator; print(ansible_operator.__file__)", cwd=tmp_path
    ).stdout
    assert Path(where.strip()).is_relative_to(installed.venv), where
    listed = installed.run(
        "ansible-galaxy", "collection", "list", "operator_sdk.util", "--format=json", cwd=tmp_path
    ).stdout
    paths = list(json.loads(listed))
    assert len(paths) == 1, paths
    assert Path(paths[0]).is_relative_to(installed.venv), paths
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - name: Ask for a reconcile in a second\n"
        "      operator_sdk.util.requeue_after:\n        time: 1s\n"
    )
    ran = installed.run("ansible-playbook", "-i", "localhost,", "--check", str(play), cwd=tmp_path)
    assert "ok=1" in ran.stdout, ran.stdout


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group `make run` leads (make and the operator), then wait."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.cluster
def test_sdk_project_make_run_runs_the_installed_operator(
    installed: Installed, tmp_path: Path, api_client: Any, kubeconfig_path: Path, namespace: str
) -> None:
    busy = [port for port in DEFAULT_PORTS if not _port_free(port)]
    assert not busy, f"ports {busy} are taken: `make run` uses the Go operator's default ports"
    project = tmp_path / "project"
    shutil.copytree(sdkproject.PROJECT, project)
    artifacts = galaxy.build_artifacts(
        tmp_path / "galaxy", ansible_galaxy=str(installed.venv / "bin" / "ansible-galaxy")
    )
    with galaxy.serve(artifacts) as url:
        installed.run(
            "ansible-galaxy", "collection", "install", "-r", "requirements.yml",
            cwd=project, ANSIBLE_GALAXY_SERVER=url,
        )  # fmt: skip
    sdkproject.install_crd(api_client)
    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=project,
            env=installed.env(KUBECONFIG=str(kubeconfig_path), WATCH_NAMESPACE=namespace),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        sample = sdkproject.create_sample(api_client, namespace)
        sdkproject.wait_reconciled(
            api_client,
            namespace,
            sample["metadata"]["name"],
            alive=lambda: proc.poll() is None,
            timeout=240,
        )
    except Exception as err:
        raise AssertionError(log_path.read_text(errors="replace")[-5000:]) from err
    finally:
        _stop(proc)
    output = log_path.read_text(errors="replace")
    # make printed the command it ran: the virtualenv's ansible-operator, found on PATH.
    assert f"{installed.venv}/bin/ansible-operator run" in output, output[:2000]
    runs = RUNNER_DIR / sdkproject.GROUP / sdkproject.VERSION / sdkproject.KIND / namespace
    used = sdkproject.module_files(runs)
    shutil.rmtree(runs, ignore_errors=True)  # the CR outlives the operator: nothing removes it
    project_k8s = installed.home / ".ansible/collections/ansible_collections/kubernetes/core"
    assert {p for p in used if p.endswith("/modules/k8s.py")} == {
        str(project_k8s / "plugins/modules/k8s.py")
    }
    status = [p for p in used if p.endswith("/operator_sdk/util/plugins/modules/k8s_status.py")]
    assert len(status) == 1
    assert Path(status[0]).is_relative_to(installed.venv), status
