"""An Operator SDK project needs only its FROM line changed to run on our base image.

The project (tests/deploy/sdk_project, written from the SDK's documented
layout) has the Dockerfile `operator-sdk init --plugins=ansible` scaffolds,
with `FROM defaults.BASE_IMAGE` instead of the Go operator's image. The test
replays (tests/deploy/replay.py) the base image's Dockerfile, then the
project's on top of it, as `docker build` would: its
`RUN ansible-galaxy collection install -r ${HOME}/requirements.yml && chmod -R
ug+rwx ${HOME}/.ansible` runs as the image's user (uid 1001, gid 0, when the
test runs as root). Galaxy is unreachable here, so ansible-galaxy is pointed
at a local stand-in (tests/deploy/galaxy.py) with ANSIBLE_GALAXY_SERVER, the
only setting added to the build; requirements.yml is the project's, unchanged.

It does so for the base image of the default Ansible line and for the one
built with `--build-arg ANSIBLE_REQUIREMENTS=requirements/ansible-2.18`, the
Go operator's line. The project pins kubernetes.core 5.4.1. The default
line's image ships 6.x: the operator's runs must use the project's copy from
~/.ansible/collections (Ansible's collection search order puts it before
site-packages). The 2.18 line's image ships 5.4.1 already, so ansible-galaxy
installs nothing and the image's copy is used. The test checks which copy
from the runs' own output: at verbosity 3 (the CR's verbosity annotation)
ansible-playbook names every module file it sends.

Then the ENTRYPOINT's `ansible-operator` runs in the image's WORKDIR with the
SDK Deployment's arguments and ANSIBLE_GATHERING, as that user, without the
read-only root filesystem (the SDK's manifests have none), against the test
cluster, until the project's sample custom resource is Successful.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.config import defaults
from tests.deploy import galaxy, sdkproject
from tests.deploy.dockerfile import parse
from tests.deploy.replay import (
    IMAGE_GID,
    IMAGE_UID,
    ImageOperator,
    Replay,
    readable_kubeconfig,
    replay_base,
)
from tests.e2e.harness import OPERATOR

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PROJECT_COLLECTIONS = "opt/ansible/.ansible/collections/ansible_collections"


@pytest.fixture
def image_dir() -> Iterator[Path]:
    # Not tmp_path: its parents are private to root, and the image's user is uid 1001.
    base = Path(tempfile.mkdtemp(prefix="ao-sdk-image-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_the_project_dockerfile_differs_from_the_sdk_scaffold_only_in_from() -> None:
    instructions = parse((sdkproject.PROJECT / "Dockerfile").read_text())
    assert [(i.keyword, i.text) for i in instructions] == [
        ("FROM", defaults.BASE_IMAGE),
        ("COPY", "requirements.yml ${HOME}/requirements.yml"),
        (
            "RUN",
            "ansible-galaxy collection install -r ${HOME}/requirements.yml"
            " && chmod -R ug+rwx ${HOME}/.ansible",
        ),
        ("COPY", "watches.yaml ${HOME}/watches.yaml"),
        ("COPY", "roles/ ${HOME}/roles/"),
        ("COPY", "playbooks/ ${HOME}/playbooks/"),
    ]


@dataclass(frozen=True)
class Line:
    requirements: str  # --build-arg ANSIBLE_REQUIREMENTS
    # Whether the project's kubernetes.core 5.4.1 is installed (and used) rather than
    # the image's: the default line ships 6.x, the 2.18 line 5.4.1 already.
    project_kubernetes_core: bool
    python_image: str | None = None  # --build-arg PYTHON_IMAGE, if not the default


LINES = {
    "default-line": Line("requirements", project_kubernetes_core=True),
    # Its pins were made on Python 3.11 (README, "Which Ansible"). On this machine
    # kind that is also the line whose replay runs as the image's user: Debian's
    # python3.11 is one uid 1001 may execute, pyenv's 3.12 under /root is not.
    "ansible-2.18": Line(
        "requirements/ansible-2.18",
        project_kubernetes_core=False,
        python_image="python:3.11.14-slim-bookworm",
    ),
}


def _build(image_dir: Path, galaxy_url: str, *, line: Line) -> Replay:
    build_args = {"ANSIBLE_REQUIREMENTS": line.requirements}
    if line.python_image is not None:
        build_args["PYTHON_IMAGE"] = line.python_image
    replay = replay_base(
        image_dir, build_env={"ANSIBLE_GALAXY_SERVER": galaxy_url}, build_args=build_args
    )
    project = image_dir / "project"
    shutil.copytree(sdkproject.PROJECT, project)
    replay.build(project / "Dockerfile", context=project)
    installed = replay.root / PROJECT_COLLECTIONS
    # A requirement the image already satisfies is not installed again.
    assert (installed / "kubernetes" / "core").is_dir() == line.project_kubernetes_core
    assert (installed / "cloud" / "common").is_dir()
    # operator_sdk.util ">=0.5.0" is satisfied by the image's own copy: not installed again.
    assert not (installed / "operator_sdk").exists()
    if replay.as_root:  # installed by the image's user, as in a docker build
        assert (installed / "cloud" / "common").stat().st_uid == IMAGE_UID
    return replay


@pytest.mark.parametrize("line", LINES.values(), ids=LINES.keys())
def test_sdk_project_runs_on_the_base_image(
    image_dir: Path, api_client: Any, kubeconfig_path: Path, namespace: str, line: Line
) -> None:
    ansible_galaxy = str(Path(OPERATOR).parent / "ansible-galaxy")
    artifacts = galaxy.build_artifacts(image_dir / "galaxy", ansible_galaxy=ansible_galaxy)
    with galaxy.serve(artifacts) as url:
        replay = _build(image_dir, url, line=line)
    tmp = replay.root / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777 if replay.as_root else stat.S_IRWXU)
    kubeconfig = readable_kubeconfig(kubeconfig_path, tmp)
    env = dict(replay.state.env)
    env |= {"ANSIBLE_GATHERING": "explicit", "KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp)}
    env |= {"WATCH_NAMESPACE": namespace}
    command = (replay.state.entrypoint or [])[2:]
    operator = ImageOperator(
        executable=replay.executable(),
        run_as=(IMAGE_UID, IMAGE_GID) if replay.as_root else None,
        kubeconfig=kubeconfig,
        workdir=tmp,
        cwd=replay.path(replay.state.workdir),
        args=[
            *command[2:],
            "--leader-elect",
            "--leader-election-id=sdk-sample",
            f"--leader-election-namespace={namespace}",
        ],
        environment=env,
        name="sdk-image",
    )
    sdkproject.install_crd(api_client)
    try:
        operator.start()
    except Exception as err:
        raise AssertionError(operator.log_path.read_text(errors="replace")[-5000:]) from err
    try:
        sample = sdkproject.create_sample(api_client, namespace)
        sdkproject.wait_reconciled(
            api_client, namespace, sample["metadata"]["name"], alive=operator.alive, timeout=240
        )
    except Exception as err:
        raise AssertionError(operator.log_path.read_text(errors="replace")[-5000:]) from err
    finally:
        operator.stop()
    used = sdkproject.module_files(operator.runner_dir)
    k8s = {path for path in used if path.endswith("/kubernetes/core/plugins/modules/k8s.py")}
    assert len(k8s) == 1, used
    from_project = Path(k8s.pop()).is_relative_to(replay.root / PROJECT_COLLECTIONS)
    assert from_project == line.project_kubernetes_core, used
    status = {
        path for path in used if path.endswith("/operator_sdk/util/plugins/modules/k8s_status.py")
    }
    assert len(status) == 1
    assert "site-packages/ansible_collections/operator_sdk/util" in status.pop()
