"""Unit tests of the config layer, plus the small project they load watches.yaml files into.

`make_project` lays out what the fixture files under tests/unit/data/watches
refer to, in a temporary directory standing in for the operator's working
directory; `load_fixture` copies one fixture there as watches.yaml and loads it.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from ansible_operator.config.watches import Watch, load_watches

DATA = Path(__file__).resolve().parent.parent / "data" / "watches"

_FILES = (
    "roles/basket/tasks/main.yml",
    "roles/cleanup/tasks/main.yml",
    "playbooks/order.yml",
    "playbooks/cleanup.yml",
    "collections/ansible_collections/shop/tools/roles/packer/tasks/main.yml",
)


def make_project(root: Path) -> Path:
    """Roles, playbooks and a collection role under `root`; returns `root`."""
    for name in _FILES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("---\n")
    return root


def load_fixture(
    name: str,
    project: Path,
    *,
    environ: Mapping[str, str] | None = None,
    max_concurrent_reconciles: int = 4,
    ansible_verbosity: int = 2,
) -> list[Watch]:
    """Load fixture `name` as `<project>/watches.yaml`, the way the operator finds it."""
    shutil.copyfile(DATA / name, project / "watches.yaml")
    return load_watches(
        "watches.yaml",
        cwd=project,
        environ={} if environ is None else environ,
        max_concurrent_reconciles_default=max_concurrent_reconciles,
        ansible_verbosity_default=ansible_verbosity,
    )


def load_text(
    text: str,
    project: Path,
    *,
    environ: Mapping[str, str] | None = None,
) -> list[Watch]:
    """Load `text` written as `<project>/watches.yaml` (for tests that build the YAML inline)."""
    (project / "watches.yaml").write_text(text)
    return load_watches(
        "watches.yaml",
        cwd=project,
        environ={} if environ is None else environ,
        max_concurrent_reconciles_default=4,
        ansible_verbosity_default=2,
    )
