"""The image's install steps produce a working operator (no Docker engine needed).

The test replays (tests/deploy/replay.py) the base image's Dockerfile
(operator/Dockerfile) and then this project's Dockerfile, which builds FROM it,
from a clean copy of the build context (a checkout's files, filtered by
.dockerignore), into a directory standing in for the image's root filesystem.
Then it runs the ENTRYPOINT's `ansible-operator` from the replayed virtualenv,
in the image's WORKDIR, with the Deployment's (config/manager) arguments and
environment, against the test cluster, and waits for the Memcached sample to
be Successful.

When the test runs as root, the operator runs as the image's user (uid 1001,
gid 0, no passwd entry, as under an arbitrary uid) with only /tmp and
~/.ansible writable, the two emptyDirs config/manager mounts over a read-only
root filesystem. That needs an interpreter of the image's Python version
(`PYTHON_IMAGE`, 3.12) that the user may execute (a system python3.12, say);
with none (pyenv's, under /root, is out of its reach), or not as root, the
operator runs as the current user instead, with a warning.
tests/deploy/test_sdk_project.py replays the same base image for the 2.18
line on Debian's python3.11, as uid 1001. `tini --`, the ENTRYPOINT's first two words, is not run:
tini is not on this machine.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.config import defaults
from tests.deploy import support
from tests.deploy.replay import (
    IMAGE_GID,
    IMAGE_UID,
    ImageOperator,
    Replay,
    readable_kubeconfig,
    replay_base,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture
def image_dir() -> Iterator[Path]:
    # Not tmp_path: its parents are private to root, and the operator runs as uid 1001.
    base = Path(tempfile.mkdtemp(prefix="ao-image-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _manager_container() -> dict[str, Any]:
    built = support.build(support.REPO / "config" / "manager")
    deployment = next(o for o in built if o["kind"] == "Deployment")
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def _installed(replay: Replay, venv_python: Path) -> dict[str, Any]:
    probe = subprocess.run(
        [
            str(venv_python),
            "-c",
            "import ansible_operator, json, importlib.metadata as m, sysconfig;"
            "print(json.dumps({'file': ansible_operator.__file__,"
            "'site': sysconfig.get_paths()['purelib'],"
            "'dists': {d.metadata['Name'].lower(): d.version for d in m.distributions()}}))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": replay.state.env["PATH"]},
    )
    facts: dict[str, Any] = json.loads(probe.stdout)
    return facts


def _check_install(replay: Replay, venv_python: Path, requirements: str) -> None:
    """Installed, not linked: the package, the line's pinned versions, no dev tools, both collections."""
    facts = _installed(replay, venv_python)
    assert Path(facts["file"]).is_relative_to(replay.root)
    pins = {}
    for line in (support.REPO / requirements / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    dists = {name.replace("_", "-"): version for name, version in facts["dists"].items()}
    wrong = {n: (v, pins[n]) for n, v in dists.items() if n in pins and pins[n] != v}
    assert not wrong, f"installed versions differ from {requirements}/constraints.txt: {wrong}"
    assert not {"pytest", "ruff", "mypy", "molecule"} & set(dists), "dev extras installed"
    collections = Path(facts["site"]) / "ansible_collections"
    assert (collections / "kubernetes" / "core" / "MANIFEST.json").is_file()
    own = collections / "operator_sdk" / "util"
    assert own.is_dir()
    assert not own.is_symlink(), "operator_sdk.util must be copied, not linked"
    # pip stays, so that a project's `RUN pip install` goes into this virtualenv.
    assert (venv_python.parent / "pip").exists()


def _check_contract(replay: Replay) -> None:
    """The Go operator image's contract (docs/deploy.md, "The base image")."""
    base = replay.images[defaults.BASE_IMAGE]
    assert base.image_env["HOME"] == base.workdir == "/opt/ansible"
    assert base.user == f"{IMAGE_UID}:{IMAGE_GID}"
    assert base.entrypoint == [
        "tini",
        "--",
        "ansible-operator",
        "run",
        "--watches-file=./watches.yaml",
    ]
    etc = replay.root / "etc" / "ansible"
    hosts = [line for line in (etc / "hosts").read_text().splitlines() if not line.startswith("#")]
    assert hosts == ["localhost ansible_connection=local"]
    assert "roles_path = /opt/ansible/roles" in (etc / "ansible.cfg").read_text()
    ansible_home = replay.root / "opt" / "ansible" / ".ansible"
    assert stat.S_IMODE(ansible_home.stat().st_mode) == 0o770
    if replay.as_root:
        assert (ansible_home.stat().st_uid, ansible_home.stat().st_gid) == (IMAGE_UID, IMAGE_GID)
        assert (ansible_home / "tmp").stat().st_uid == IMAGE_UID
    # Only tini and the user's passwd entry are left out (and chown when not root).
    assert {command for _, command in replay.skipped} <= {"apt-get", "rm", "ln", "useradd", "chown"}


def _as_deployed(replay: Replay, *, namespace: str) -> tuple[list[str], dict[str, str]]:
    """The operator's arguments and environment in config/manager's Deployment.

    Arguments: the ENTRYPOINT's, then the Deployment's but its fixed ports, then
    what lets it share the test cluster. Environment: the image's, the
    Deployment's, and WATCH_NAMESPACE.
    """
    container = _manager_container()
    command = (replay.state.entrypoint or [])[2:]
    assert command[:2] == ["ansible-operator", "run"]
    own_ports = ("--health-probe-bind-address", "--metrics-bind-address")
    args = [*command[2:]]
    args += [a for a in container["args"] if not a.startswith(own_ports)]
    args += [
        f"--leader-election-namespace={namespace}",
        "--proxy-port=0",
        "--user-metrics-bind-address=0",
    ]
    env = dict(replay.state.env)
    env |= {e["name"]: e["value"] for e in container.get("env", [])}
    env["WATCH_NAMESPACE"] = namespace
    return args, env


def test_dockerfile_install_steps_give_a_working_operator(
    image_dir: Path, api_client: Any, kubeconfig_path: Path, namespace: str
) -> None:
    replay = replay_base(image_dir)
    _check_contract(replay)
    replay.build(support.REPO / "Dockerfile", context=image_dir / "context")
    executable = replay.executable()
    _check_install(replay, executable.parent / "python", "requirements")
    for name in ("watches.yaml", "roles/memcached/tasks/main.yml", "playbooks"):
        assert replay.path(name).exists(), name

    # Run it as the Deployment would: its args and env, the image's WORKDIR and user.
    tmp = replay.root / "tmp"
    tmp.mkdir(exist_ok=True)
    run_as = (IMAGE_UID, IMAGE_GID) if replay.as_root else None
    if run_as is not None:
        assert replay.state.user == f"{IMAGE_UID}:{IMAGE_GID}"  # inherited from the base
        # The two emptyDirs of config/manager (~/.ansible is the image user's already);
        # everything else stays root's, read-only.
        tmp.chmod(0o1777)
    kubeconfig = readable_kubeconfig(kubeconfig_path, tmp)
    support.ensure_crds(api_client)
    args, env = _as_deployed(replay, namespace=namespace)
    env |= {"KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp)}
    operator = ImageOperator(
        executable=executable,
        run_as=run_as,
        kubeconfig=kubeconfig,
        workdir=tmp,
        cwd=replay.path(replay.state.workdir),
        args=args,
        environment=env,
        name="image",
    )
    sample = next(o for o in support.samples() if o["kind"] == "Memcached")
    try:
        operator.start()
    except Exception as err:
        raise AssertionError(operator.log_path.read_text(errors="replace")[-5000:]) from err
    try:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            support.GROUP, support.VERSION, namespace, support.plurals()["Memcached"], sample
        )
        support.wait_successful(api_client, namespace, [sample], timeout=240)
    finally:
        operator.stop()
    if run_as is not None:  # the runs really were the image user's
        assert operator.runner_dir.stat().st_uid == IMAGE_UID
    log = operator.log_path.read_text(errors="replace")
    assert "Permission denied" not in log, log[-3000:]
    assert "Read-only file system" not in log, log[-3000:]
    assert sys.executable not in log  # the runs used the replayed virtualenv
    # Warm Ansible works in the image's layout too (package in site-packages,
    # uid 1001, only /tmp and ~/.ansible writable): no silent cold fallback.
    assert "Warm Ansible servers started" in log, log[-3000:]
    assert "Warm Ansible is not available" not in log, log[-3000:]
