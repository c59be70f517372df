"""docs/architecture.md names modules; every one it names must exist, and every module
on the reconcile path must be named (a renamed module must not leave the map stale)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "ansible_operator"
DOC = ROOT / "docs" / "architecture.md"
# Paths such as `controller/reconciler.py` or `errors.py`, relative to the package.
_NAMED = re.compile(r"`((?:[a-z_]+/)*[a-z_]+\.py)`")
_ON_THE_PATH = ("controller", "launch", "runner", "kube")


def named() -> set[str]:
    return set(_NAMED.findall(DOC.read_text()))


def test_every_module_named_exists() -> None:
    missing = sorted(name for name in named() if not (PACKAGE / name).is_file())
    assert missing == []


def test_every_package_on_the_reconcile_path_is_mapped() -> None:
    names = named()
    for package in _ON_THE_PATH:
        for module in sorted((PACKAGE / package).glob("*.py")):
            if module.name == "__init__.py":
                continue
            relative = f"{package}/{module.name}"
            assert relative in names or module.stem in _mentioned_in_maps(package), relative


def _mentioned_in_maps(package: str) -> set[str]:
    """Modules its own __init__ maps (those need not be in the walk-through)."""
    text = (PACKAGE / package / "__init__.py").read_text()
    return set(re.findall(r"^\s{4}([a-z_]+)\s", text, re.M))
