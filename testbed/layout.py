"""Where the testbed keeps things: binaries, state, logs and the kubeconfig.

Used by every other testbed module. The defaults live here and nowhere else:
binaries come from the build cache outside the repository ($TESTBED_CACHE),
and the state of a running testbed lives in `.testbed/` at the repository root
(git-ignored), so `make testbed-down` or a new `up` can always find it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(__file__).resolve().parent

#: How many fake nodes kwok manages.
DEFAULT_NODES = 3
#: Seconds to wait for one component to become healthy.
COMPONENT_TIMEOUT = 90.0
#: Whole start-ups tried before `up` gives up (each with fresh ports).
START_ATTEMPTS = 2
#: Seconds between SIGTERM and SIGKILL when stopping a component.
STOP_GRACE = 10.0
#: Binaries the testbed needs, all produced by build.sh.
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)


def default_cache_dir() -> Path:
    explicit = os.environ.get("TESTBED_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ansible-operator-testbed"


@dataclass(frozen=True)
class Layout:
    """Paths of one testbed instance. Two instances need two state dirs."""

    state_dir: Path
    cache_dir: Path

    @classmethod
    def default(cls) -> Layout:
        state = os.environ.get("TESTBED_STATE_DIR")
        return cls(
            state_dir=Path(state) if state else REPO_ROOT / ".testbed",
            cache_dir=default_cache_dir(),
        )

    @property
    def bin_dir(self) -> Path:
        return self.cache_dir / "bin"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def etcd_dir(self) -> Path:
        return self.state_dir / "etcd"

    @property
    def kwok_config(self) -> Path:
        return self.state_dir / "kwok.yaml"

    def missing_binaries(self) -> list[str]:
        return [name for name in BINARIES if not os.access(self.binary(name), os.X_OK)]


def read_versions(path: Path | None = None) -> dict[str, str]:
    """The KEY=VALUE pins of versions.env (comments and blank lines skipped)."""
    values = {}
    lines = (path or PACKAGE_DIR / "versions.env").read_text().splitlines()
    for number, raw in enumerate(lines):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"testbed/versions.env line {number + 1}: not KEY=VALUE: {line!r}")
        values[key.strip()] = value.strip()
    return values
