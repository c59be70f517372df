"""Build (or reuse) the reference: the Go `ansible-operator` and the Python it runs Ansible with.

Called by `bench.run` before any scenario, or alone (`python -m bench.reference`).
Everything lands in a cache outside the repository, `$ANSIBLE_OPERATOR_BENCH_CACHE`
(default `~/.cache/ansible-operator-bench`):

* `bin/ansible-operator` - built with the ordinary go client,
  `go install <module>/cmd/ansible-operator@<version>` with GOTOOLCHAIN=local,
  CGO_ENABLED=0 and GOBIN=<cache>/bin.
  When the Go module proxy refuses that module (some proxies answer 403 for it),
  the run stops with that error; a binary of that version already present at
  `<cache>/bin/ansible-operator` (with its stamp) is reused as it is. This
  repository never builds the reference from any other source.
* `venv/` - ansible-core, ansible-runner and kubernetes at the same versions as
  our operator (read from requirements/constraints.txt, so both operators run
  the very same Ansible; when ours runs another Ansible line, `venv-ansible-<line>/`
  from requirements/ansible-<line>/ and that venv's Python: the 2.18 line is the Go
  operator's own image's ansible-core), requests-unixsocket, ansible-runner's `http` event plugin
  (`ansible-runner-http` from PyPI), matplotlib for the chart, and the
  kubernetes.core collection (scripts/install_collections.py). The plugin is
  checked against a unix socket the way the Go operator uses it (bench/plugin_check.py).

Each part has a stamp file; it is rebuilt only when what it was built from changes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODULE = "github.com/operator-framework/ansible-operator-plugins"
VERSION = "v1.42.3"
#: Shared with our operator's pins, so both run the same Ansible and kubernetes client.
SHARED_PINS = ("ansible-core", "ansible-runner", "kubernetes", "requests")
#: Only the reference needs these.
EXTRA_PINS = ("requests-unixsocket==0.4.1", "ansible-runner-http==1.0.0", "matplotlib==3.11.2")


class ReferenceError(RuntimeError):
    """The reference could not be built; the message says what to do."""


@dataclass(frozen=True)
class Reference:
    cache: Path
    binary: Path
    venv: Path

    @property
    def venv_bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.venv_bin / "python"


def default_cache() -> Path:
    explicit = os.environ.get("ANSIBLE_OPERATOR_BENCH_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ansible-operator-bench"


def _say(message: str) -> None:
    print(f"[reference] {message}", file=sys.stderr, flush=True)


def _go_version() -> str:
    try:
        out = subprocess.run(
            ["go", "version"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as err:
        raise ReferenceError(f"`go version` failed ({err}); Go >= 1.26.3 is needed") from err
    return out


def _go_env() -> dict[str, str]:
    return {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}


def ensure_binary(cache: Path) -> Path:
    binary = cache / "bin" / "ansible-operator"
    stamp = cache / "bin" / ".stamp"
    wanted = f"{MODULE}@{VERSION} {_go_version()}"
    if os.access(binary, os.X_OK) and stamp.is_file() and stamp.read_text().startswith(wanted):
        return binary
    _say(f"building {MODULE}/cmd/ansible-operator@{VERSION} (a few minutes on 2 cores)")
    result = subprocess.run(
        ["go", "install", f"{MODULE}/cmd/ansible-operator@{VERSION}"],
        env={**_go_env(), "GOBIN": str(binary.parent)},
        check=False,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ReferenceError(
            f"`go install {MODULE}/cmd/ansible-operator@{VERSION}` failed:\n"
            f"{result.stderr.strip()}\n"
            f"The Go module proxy did not provide the reference; a binary of {VERSION} placed at "
            f"{binary} with the stamp {stamp} (first line: {wanted}) is reused as it is."
        )
    how = "go install"
    stamp.write_text(f"{wanted}\n{how}\n")
    return binary


def line_requirements() -> tuple[str, Path]:
    """The Ansible line of the interpreter running the benchmark (ours) and its pins:
    ("", requirements/) on the default line, ("2.18", requirements/ansible-2.18/) ..."""
    import importlib.metadata  # noqa: PLC0415

    line = ".".join(importlib.metadata.version("ansible-core").split(".")[:2])
    other = REPO / "requirements" / f"ansible-{line}"
    if (other / "constraints.txt").is_file():
        return line, other
    return "", REPO / "requirements"


def _pins() -> list[str]:
    constraints = (line_requirements()[1] / "constraints.txt").read_text().splitlines()
    found = {}
    for line in constraints:
        name, _, version = line.strip().partition("==")
        if version and name.lower() in SHARED_PINS:
            found[name.lower()] = f"{name}=={version}"
    missing = [n for n in SHARED_PINS if n not in found]
    if missing:
        raise ReferenceError(f"requirements/constraints.txt pins none of {missing}")
    return [found[n] for n in SHARED_PINS] + list(EXTRA_PINS)


def _collections_cache() -> Path:
    explicit = os.environ.get("COLLECTIONS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ansible-operator-collections"


def ensure_venv(cache: Path) -> Path:
    line, requirements = line_requirements()
    venv = cache / (f"venv-ansible-{line}" if line else "venv")
    python = venv / "bin" / "python"
    stamp = venv / ".stamp"
    lock = (requirements / "collections.txt").read_text()
    wanted = json.dumps({"pins": _pins(), "collections": lock}, sort_keys=True)
    if python.exists() and stamp.is_file() and stamp.read_text() == wanted:
        return venv
    _say(f"creating {venv}")
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *_pins()], check=True)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "install_collections.py"),
            "--site-packages",
            site,
            "--lock",
            str(requirements / "collections.txt"),
            "--cache",
            str(_collections_cache()),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    check = subprocess.run(
        [str(python), str(REPO / "bench" / "plugin_check.py")],
        check=False,
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        raise ReferenceError(f"ansible-runner's http event plugin does not work: {check.stdout}")
    stamp.write_text(wanted)
    return venv


def ensure(cache: Path | None = None) -> Reference:
    cache = cache or default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    binary = ensure_binary(cache)
    venv = ensure_venv(cache)
    return Reference(cache=cache, binary=binary, venv=venv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        ref = ensure(args.cache)
    except ReferenceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"go operator: {ref.binary}\nits python:  {ref.python}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
