"""Replay Dockerfiles without a Docker engine, and run what they built.

Used by tests/deploy/test_dockerfile_install.py (the base image, then this
project's image on it) and tests/deploy/test_sdk_project.py (the base image,
then an Operator SDK project's Dockerfile on it). `Replay.build` carries out a
Dockerfile instruction by instruction into a directory standing in for the
image's root filesystem: WORKDIR, COPY (also `--from` another stage), ENV,
USER and RUN, with every image path mapped under that directory, so
`python -m venv /opt/venv` makes a fresh virtualenv of the image's Python
(the version of its `PYTHON_IMAGE`) there and pip
installs into it exactly as the Dockerfile says. A Dockerfile built with a
`tag` is an image the next one may name in `FROM`: its environment, working
directory, user and entrypoint carry over, as in Docker.

What is not replayed, on purpose:

* in a RUN line with apt-get or useradd: apt-get (it only installs tini, the
  image's PID 1), rm of apt's lists, the `ln -s` of tini and the operator to
  the Go image's paths (outside the mapped root), and useradd (the image's
  user has no passwd entry under an arbitrary uid anyway). The rest of such a
  line (mkdir, chown, chmod of ~/.ansible) is carried out, chown only when the
  test runs as root;
* pip's `--no-cache-dir`: dropped so pip's cache makes reruns fast;
* RUN under `USER`: as that uid/gid when the test runs as root (so a project's
  `ansible-galaxy collection install` proves ~/.ansible is the image user's),
  else as the current user.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_operator.config import defaults
from testbed.probes import wait_until
from tests.deploy.dockerfile import Instruction, context_files, parse
from tests.e2e.harness import OperatorProcess

IMAGE_UID, IMAGE_GID = 1001, 0
# The python image's environment (its PATH, its locale), not this process's.
IMAGE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}
# Outside the mapped root (/usr, /tini) or system-wide: never carried out here.
NOT_REPLAYED = {"apt-get", "useradd", "rm", "ln"}


def commands(script: str) -> list[list[str]]:
    """The simple commands of a `a && b && c` RUN line."""
    return [shlex.split(part) for part in re.split(r"&&|;", script) if part.strip()]


def is_system_setup(script: str) -> bool:
    return any(c[0] in {"apt-get", "useradd"} for c in commands(script))


@dataclass
class ImageState:
    """What a FROM of a replayed image starts with."""

    env: dict[str, str]
    image_env: dict[str, str]
    workdir: str = "/"
    user: str | None = None
    entrypoint: list[str] | None = None
    args: dict[str, str] = field(default_factory=dict)  # this stage's ARGs (RUN sees them)


@dataclass
class Replay:
    """Carries out Dockerfile instructions with image paths mapped under `root`."""

    root: Path
    python: str  # the interpreter `python` means in the python image
    as_root: bool  # whether RUN may chown and switch to USER
    build_env: dict[str, str] = field(default_factory=dict)  # extra, for RUN only
    build_args: dict[str, str] = field(default_factory=dict)  # `docker build --build-arg`
    images: dict[str, ImageState] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line, command)
    image_dirs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        shim = self.root.parent / "shim"
        shim.mkdir(exist_ok=True)
        if not (shim / "python").exists():
            (shim / "python").symlink_to(self.python)
        self.base_env = dict(IMAGE_ENV, PATH=f"{shim}:{IMAGE_ENV['PATH']}")
        self.state = ImageState(dict(self.base_env), dict(IMAGE_ENV))
        self.context = self.root

    # --- paths ---------------------------------------------------------------------

    def path(self, image_path: str) -> Path:
        joined = os.path.normpath(os.path.join(self.state.workdir, image_path))
        return self.root / joined.lstrip("/")

    def rewrite(self, text: str) -> str:
        """Image paths (under a directory the Dockerfiles created) -> paths under root."""
        for top in sorted(self.image_dirs, key=len, reverse=True):
            text = re.sub(rf"(?<![\w./-]){re.escape(top)}(?=/|\s|:|$)", f"{self.root}{top}", text)
        return text

    def _vars(self, text: str, env: dict[str, str]) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), text)

    def _note_dir(self, image_path: str) -> None:
        absolute = os.path.normpath(os.path.join(self.state.workdir, image_path))
        top = "/" + absolute.strip("/").split("/")[0]
        if top != "/":
            self.image_dirs.add(top)

    # --- instructions ----------------------------------------------------------------

    def build(self, dockerfile: Path, *, context: Path, tag: str | None = None) -> None:
        self.context = context
        self.global_args: dict[str, str] = {}  # ARGs before the first FROM: for FROM lines
        self.in_stage = False
        for ins in parse(dockerfile.read_text()):
            getattr(self, f"do_{ins.keyword.lower()}")(ins)
        if tag is not None:
            self.images[tag] = self.state

    def do_arg(self, ins: Instruction) -> None:
        name, _, default = ins.text.partition("=")
        value = self.build_args.get(name, default)
        if not self.in_stage:
            self.global_args[name] = value
        else:
            self.state.args[name] = value

    def do_from(self, ins: Instruction) -> None:
        image = self._vars(ins.text.split()[0], self.global_args)
        self.in_stage = True
        if image in self.images:
            base = self.images[image]
            self.state = ImageState(
                dict(base.env), dict(base.image_env), base.workdir, base.user, base.entrypoint
            )
            return
        assert image.startswith("python:"), f"line {ins.line}: FROM {image}: not replayed yet"
        self.state = ImageState(dict(self.base_env), dict(IMAGE_ENV))

    def do_workdir(self, ins: Instruction) -> None:
        assert ins.text.startswith("/"), f"line {ins.line}: WORKDIR must be absolute"
        self._note_dir(ins.text)
        self.state.workdir = ins.text
        self.path(".").mkdir(parents=True, exist_ok=True)

    def do_env(self, ins: Instruction) -> None:
        for pair in shlex.split(ins.text):
            name, _, value = pair.partition("=")
            if value.startswith("/"):
                self._note_dir(value)
            self.state.image_env[name] = self._vars(value, self.state.image_env)
            self.state.env[name] = self._vars(self.rewrite(value), self.state.env)

    def do_copy(self, ins: Instruction) -> None:
        *sources, dest = [self._vars(w, self.state.image_env) for w in shlex.split(ins.text)]
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
        for path in re.findall(r"(?<![\w./-])/\w+", ins.text):
            if path not in ("/bin", "/usr", "/etc", "/dev", "/var", "/sbin"):
                self._note_dir(path)
        script = ins.text
        if is_system_setup(script):
            kept = []
            for command in commands(script):
                if command[0] in NOT_REPLAYED or (command[0] == "chown" and not self.as_root):
                    self.skipped.append((ins.line, command[0]))
                else:
                    kept.append(shlex.join(command))
            script = " && ".join(kept)
        script = self.rewrite(script).replace(" --no-cache-dir", "")
        ids: dict[str, Any] = {}
        if self.state.user is not None and self.as_root:
            uid, _, gid = self.state.user.partition(":")
            ids = {"user": int(uid), "group": int(gid or 0), "extra_groups": []}
        result = subprocess.run(
            ["/bin/sh", "-c", script],
            cwd=self.path("."),
            env={**self.state.env, **self.state.args, **self.build_env},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            **ids,
        )
        assert result.returncode == 0, (
            f"Dockerfile line {ins.line} failed ({result.returncode}): {script}\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )

    def do_user(self, ins: Instruction) -> None:
        self.state.user = ins.text

    def do_entrypoint(self, ins: Instruction) -> None:
        form = ins.exec_form()
        assert form is not None, f"line {ins.line}: ENTRYPOINT must use the exec form"
        self.state.entrypoint = form

    def do_label(self, ins: Instruction) -> None:
        pass

    def do_expose(self, ins: Instruction) -> None:
        pass

    def executable(self) -> Path:
        """The ENTRYPOINT's command (after `tini --`), found on the image's PATH."""
        assert self.state.entrypoint is not None
        assert self.state.entrypoint[:2] == ["tini", "--"]
        found = shutil.which(self.state.entrypoint[2], path=self.state.env["PATH"])
        assert found is not None, self.state.entrypoint
        assert Path(found).is_relative_to(self.root), found
        return Path(found)


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


def find_python(version: str, *, for_others: bool) -> str | None:
    """A `python<version>` interpreter; `for_others`: one that other users may run too.

    The virtualenv links to it, and the operator runs as uid 1001: an
    interpreter under /root (pyenv's) is out of that user's reach.
    """
    home = Path.home()
    candidates = [
        *(Path(d) / f"python{version}" for d in os.environ.get("PATH", "").split(os.pathsep)),
        Path("/usr/bin") / f"python{version}",
        *sorted(home.glob(f".pyenv/versions/{version}.*/bin/python{version}"), reverse=True),
    ]
    for candidate in candidates:
        if not os.access(candidate, os.X_OK):
            continue
        real = subprocess.run(  # pyenv's shims exit 127 for a version not selected
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


def python_version_of(image: str) -> str:
    """`python:3.12.12-slim-bookworm` -> `3.12`."""
    match = re.fullmatch(r"python:(\d+\.\d+)[.\w-]*", image)
    assert match, f"PYTHON_IMAGE={image}: not a python:<major>.<minor>... image"
    return match.group(1)


def image_python(version: str) -> tuple[str, bool]:
    """The interpreter `python` stands for, and whether the image's user can be used.

    As root, replayed RUN lines under USER and the operator run as the image's
    user, who needs an interpreter it can reach (Debian's /usr/bin/python3.11,
    not one under /root: on this machine kind, pyenv's 3.12). With none, or not
    as root, everything runs as the current user.
    """
    as_image_user = os.geteuid() == 0
    python = find_python(version, for_others=True) if as_image_user else None
    if python is None:
        if as_image_user:
            warnings.warn(
                f"no python{version} that uid {IMAGE_UID} can execute: the replayed image"
                " runs as root, so running as the image's user is not checked",
                stacklevel=2,
            )
        as_image_user = False
        python = find_python(version, for_others=False)
    assert python is not None, f"no python{version} on PATH, in /usr/bin or in pyenv's installs"
    return python, as_image_user


def base_python_image(dockerfile: Path) -> str:
    """The default of the base image's `ARG PYTHON_IMAGE`."""
    for ins in parse(dockerfile.read_text()):
        name, _, default = ins.text.partition("=")
        if ins.keyword == "ARG" and name == "PYTHON_IMAGE":
            return default
    raise AssertionError(f"{dockerfile}: no ARG PYTHON_IMAGE")


def replay_base(image_dir: Path, **options: Any) -> Replay:
    """A Replay of the base image (operator/Dockerfile), tagged defaults.BASE_IMAGE.

    The build context is a clean copy of the checkout filtered by .dockerignore,
    as `docker build -f operator/Dockerfile .` would send it.
    """
    repo = Path(__file__).resolve().parents[2]
    context = image_dir / "context"
    for name in context_files(repo):
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, context / name)
    root = image_dir / "root"
    root.mkdir()
    dockerfile = repo / "operator" / "Dockerfile"
    image = options.get("build_args", {}).get("PYTHON_IMAGE") or base_python_image(dockerfile)
    python, as_image_user = image_python(python_version_of(image))
    replay = Replay(root=root, python=python, as_root=as_image_user, **options)
    replay.build(dockerfile, context=context, tag=defaults.BASE_IMAGE)
    return replay


def readable_kubeconfig(source: Path, tmp: Path) -> Path:
    """A copy of the test kubeconfig in the image's /tmp that group 0 may read."""
    kubeconfig = tmp / "kubeconfig"
    shutil.copy(source, kubeconfig)
    kubeconfig.chmod(stat.S_IRUSR | stat.S_IRGRP)
    return kubeconfig
