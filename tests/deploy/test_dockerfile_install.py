"""The Dockerfile's install steps produce a working operator (no Docker engine needed).

The test replays the Dockerfile instruction by instruction, from a clean copy
of the build context (a checkout's files, filtered by .dockerignore), into a
directory standing in for the image's root filesystem: WORKDIR, COPY
(including `--from` another stage), ENV and RUN are carried out with every
image path mapped under that directory, so `python -m venv /opt/venv` makes a
fresh python3.11 virtualenv there and pip installs into it exactly as the
Dockerfile says. Then it runs the ENTRYPOINT's `ansible-operator` from that
virtualenv, in the image's WORKDIR, with the Deployment's (config/manager)
arguments and environment, against the test cluster, and waits for the
Memcached sample to be Successful.

What is not replayed, on purpose:

* RUN lines whose commands are all system set-up (SYSTEM_COMMANDS): apt-get
  only installs tini, the image's PID 1; useradd/mkdir/chown/chmod create the
  image's user and its writable ~/.ansible. Instead, when the test runs as
  root, the operator runs as that user (uid 1001, gid 0, no passwd entry, as
  under an arbitrary uid) with only /tmp and ~/.ansible writable, the two
  emptyDirs config/manager mounts over a read-only root filesystem. That
  needs a python3.11 the user may execute (Debian's /usr/bin/python3.11, say);
  with none, or not as root, the operator runs as the current user instead.
* `tini --`, the ENTRYPOINT's first two words: tini is not on this machine.
* pip's `--no-cache-dir`: dropped so pip's cache makes reruns fast.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.probes import wait_until
from tests.deploy import support
from tests.deploy.dockerfile import Instruction, context_files, parse
from tests.e2e.harness import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# RUN lines made only of these commands set up the system, not the operator.
SYSTEM_COMMANDS = {"apt-get", "rm", "useradd", "mkdir", "chown", "chmod"}
IMAGE_UID, IMAGE_GID = 1001, 0
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _commands(script: str) -> list[list[str]]:
    """The simple commands of a `a && b && c` RUN line."""
    return [shlex.split(part) for part in re.split(r"&&|;", script) if part.strip()]


def _is_system_setup(script: str) -> bool:
    commands = _commands(script)
    return any(c[0] in {"apt-get", "useradd"} for c in commands) and all(
        c[0] in SYSTEM_COMMANDS for c in commands
    )


class Replay:
    """Carries out Dockerfile instructions with image paths mapped under `root`."""

    def __init__(self, *, root: Path, context: Path, python: str, base_env: dict[str, str]):
        self.root, self.context = root, context
        self.base_env = base_env
        self.env = dict(base_env)
        self.workdir = "/"
        self.user: str | None = None
        self.entrypoint: list[str] | None = None
        self.skipped: list[Instruction] = []
        self.image_dirs: set[str] = set()
        # `python` in the base image is python3.11: a shim directory first on PATH.
        shim = root.parent / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "python").symlink_to(python)
        self.base_env["PATH"] = f"{shim}:{base_env['PATH']}"

    def path(self, image_path: str) -> Path:
        joined = os.path.normpath(os.path.join(self.workdir, image_path))
        return self.root / joined.lstrip("/")

    def rewrite(self, text: str) -> str:
        """Image paths (under a directory the Dockerfile created) -> paths under root."""
        for top in sorted(self.image_dirs, key=len, reverse=True):
            text = re.sub(rf"(?<![\w./-]){re.escape(top)}(?=/|\s|:|$)", f"{self.root}{top}", text)
        return text

    def expand(self, text: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: self.env.get(m.group(1), ""), self.rewrite(text))

    def _note_dir(self, image_path: str) -> None:
        absolute = os.path.normpath(os.path.join(self.workdir, image_path))
        top = "/" + absolute.strip("/").split("/")[0]
        if top != "/":
            self.image_dirs.add(top)

    def do(self, ins: Instruction) -> None:
        getattr(self, f"do_{ins.keyword.lower()}")(ins)

    def do_from(self, ins: Instruction) -> None:
        self.env, self.workdir, self.user = dict(self.base_env), "/", None

    def do_workdir(self, ins: Instruction) -> None:
        assert ins.text.startswith("/"), f"line {ins.line}: WORKDIR must be absolute"
        self._note_dir(ins.text)
        self.workdir = ins.text
        self.path(".").mkdir(parents=True, exist_ok=True)

    def do_env(self, ins: Instruction) -> None:
        for pair in shlex.split(ins.text):
            name, _, value = pair.partition("=")
            if value.startswith("/"):
                self._note_dir(value)
            self.env[name] = self.expand(value)

    def do_copy(self, ins: Instruction) -> None:
        *sources, dest = shlex.split(ins.text)
        self._note_dir(dest)
        target = self.path(dest)
        for source in sources:
            if "from" in ins.flags:  # another stage: the same mapped filesystem
                origin = self.root / source.lstrip("/")
            else:
                origin = self.context / source
            assert origin.exists(), f"line {ins.line}: {source} is not in the build context"
            if origin.resolve() == target.resolve():
                continue
            if origin.is_dir():
                shutil.copytree(origin, target, symlinks=True, dirs_exist_ok=True)
            else:
                into_dir = dest.endswith("/") or len(sources) > 1
                (target if into_dir else target.parent).mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, target / origin.name if into_dir else target)

    def do_run(self, ins: Instruction) -> None:
        assert ins.exec_form() is None, f"line {ins.line}: use the shell form for RUN"
        if _is_system_setup(ins.text):
            self.skipped.append(ins)
            return
        for path in re.findall(r"(?<![\w./-])/\w+", ins.text):
            if path not in ("/bin", "/usr", "/etc", "/dev"):
                self._note_dir(path)
        script = self.rewrite(ins.text).replace(" --no-cache-dir", "")
        result = subprocess.run(
            ["/bin/sh", "-c", script],
            cwd=self.path("."),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert result.returncode == 0, (
            f"Dockerfile line {ins.line} failed ({result.returncode}): {script}\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )

    def do_user(self, ins: Instruction) -> None:
        self.user = ins.text

    def do_entrypoint(self, ins: Instruction) -> None:
        form = ins.exec_form()
        assert form is not None, f"line {ins.line}: ENTRYPOINT must use the exec form"
        self.entrypoint = form

    def do_label(self, ins: Instruction) -> None:
        pass

    def do_expose(self, ins: Instruction) -> None:
        pass


class ImageOperator(OperatorProcess):
    """OperatorProcess with another executable and, when root, the image's uid/gid."""

    def __init__(
        self,
        *,
        executable: Path,
        run_as: tuple[int, int] | None,
        environment: dict[str, str],
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.argv[0] = str(executable)
        self.run_as = run_as
        # Exactly the container's environment: nothing inherited from this process.
        self.env = dict(environment)

    def start(self, *, wait_ready: bool = True) -> ImageOperator:
        log = self.log_path.open("ab")
        ids: dict[str, Any] = {}
        if self.run_as is not None:
            ids = {"user": self.run_as[0], "group": self.run_as[1], "extra_groups": []}
        self.proc = subprocess.Popen(
            self.argv, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, **ids
        )
        log.close()
        if wait_ready:
            wait_until("operator ready", self.ready, timeout=90, alive=self.alive)
        return self


@pytest.fixture
def image_dir() -> Iterator[Path]:
    # Not tmp_path: its parents are private to root, and the operator runs as uid 1001.
    base = Path(tempfile.mkdtemp(prefix="ao-image-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _python311(*, for_others: bool) -> str | None:
    """A python3.11 interpreter; `for_others`: one that other users may run too.

    The virtualenv links to it, and the operator runs as uid 1001: an
    interpreter under /root (pyenv) would be out of its reach.
    """
    for directory in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin"]:
        candidate = Path(directory) / "python3.11"
        if not os.access(candidate, os.X_OK):
            continue
        real = subprocess.run(
            [str(candidate), "-c", "import sys, os; print(os.path.realpath(sys._base_executable))"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if not real:
            continue
        if not for_others:
            return real
        path = Path(real)
        reachable = all(p.stat().st_mode & stat.S_IXOTH for p in path.parents)
        if reachable and path.stat().st_mode & stat.S_IXOTH:
            return real
    return None


def _manager_container() -> dict[str, Any]:
    built = support.build(support.REPO / "config" / "manager")
    deployment = next(o for o in built if o["kind"] == "Deployment")
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def _writable_by(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    path.chmod(0o770)


def test_dockerfile_install_steps_give_a_working_operator(
    image_dir: Path, api_client: Any, kubeconfig_path: Path, namespace: str
) -> None:
    # As root, the operator runs as the image's user, who needs an interpreter
    # it can reach (Debian's /usr/bin/python3.11, not one under /root).
    as_image_user = os.geteuid() == 0
    python = _python311(for_others=True) if as_image_user else None
    if python is None:
        if as_image_user:
            warnings.warn(
                f"no python3.11 that uid {IMAGE_UID} can execute: the replayed operator runs"
                " as root, so running as the image's user is not checked",
                stacklevel=1,
            )
        as_image_user = False
        python = _python311(for_others=False)
    assert python is not None, "no python3.11 on PATH (the image's Python; make venv uses it)"
    repo = support.REPO
    context = image_dir / "context"
    for name in context_files(repo):
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, context / name)
    root = image_dir / "root"
    root.mkdir()
    replay = Replay(
        root=root,
        context=context,
        python=python,
        # The python image's environment (its PATH, its locale), not this process's.
        base_env={"PATH": IMAGE_PATH, "LANG": "C.UTF-8"},
    )
    for ins in parse((repo / "Dockerfile").read_text()):
        replay.do(ins)

    # Only the tini and user set-up was skipped.
    assert [("apt-get" in i.text, "useradd" in i.text) for i in replay.skipped] == [
        (True, False),
        (False, True),
    ]
    assert replay.entrypoint is not None
    assert replay.entrypoint[:2] == ["tini", "--"]
    command = replay.entrypoint[2:]
    executable = shutil.which(command[0], path=replay.env["PATH"])
    assert executable is not None
    assert Path(executable).is_relative_to(root), executable
    venv_python = Path(executable).parent / "python"

    # Installed, not linked: the package, pinned versions, no dev tools, both collections.
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
        env={"PATH": replay.env["PATH"]},
    )
    facts = json.loads(probe.stdout)
    assert Path(facts["file"]).is_relative_to(root)
    pins = {}
    for line in (repo / "requirements" / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    dists = {name.replace("_", "-"): version for name, version in facts["dists"].items()}
    wrong = {n: (v, pins[n]) for n, v in dists.items() if n in pins and pins[n] != v}
    assert not wrong, f"installed versions differ from requirements/constraints.txt: {wrong}"
    assert not {"pytest", "ruff", "mypy", "molecule"} & set(dists), "dev extras installed"
    collections = Path(facts["site"]) / "ansible_collections"
    assert (collections / "kubernetes" / "core" / "MANIFEST.json").is_file()
    own = collections / "operator_sdk" / "util"
    assert own.is_dir()
    assert not own.is_symlink(), "operator_sdk.util must be copied, not linked"

    # Run it as the Deployment would: its args and env, the image's WORKDIR and user.
    container = _manager_container()
    tmp = root / "tmp"
    home = Path(replay.env["HOME"])
    ansible_home = home / ".ansible"
    tmp.mkdir(exist_ok=True)
    ansible_home.mkdir(parents=True, exist_ok=True)
    run_as = None
    if as_image_user:
        assert replay.user == f"{IMAGE_UID}:{IMAGE_GID}"
        run_as = (IMAGE_UID, IMAGE_GID)
        # The two emptyDirs of config/manager; everything else stays root's, read-only.
        _writable_by(ansible_home, IMAGE_UID, IMAGE_GID)
        tmp.chmod(0o1777)
    kubeconfig = tmp / "kubeconfig"
    shutil.copy(kubeconfig_path, kubeconfig)
    kubeconfig.chmod(stat.S_IRUSR | stat.S_IRGRP)  # group 0 reads it
    support.ensure_crds(api_client)
    # The image's environment, the Deployment's, and what a pod would get otherwise.
    env = dict(replay.env)
    env |= {e["name"]: e["value"] for e in container.get("env", [])}
    env |= {"KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp), "WATCH_NAMESPACE": namespace}
    own_ports = ("--health-probe-bind-address", "--metrics-bind-address")
    args = [*command[2:]]
    args += [a for a in container["args"] if not a.startswith(own_ports)]
    args += [
        f"--leader-election-namespace={namespace}",
        "--proxy-port=0",
        "--user-metrics-bind-address=0",
    ]
    assert command[:2] == ["ansible-operator", "run"]
    operator = ImageOperator(
        executable=Path(executable),
        run_as=run_as,
        kubeconfig=kubeconfig,
        workdir=tmp,
        cwd=replay.path(replay.workdir),
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
