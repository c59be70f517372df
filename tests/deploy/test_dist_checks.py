"""scripts/build_dist.py refuses a wrong wheel or sdist, one case at a time.

Fast: the archives are written here, no build. Each case starts from the
smallest wheel (or sdist) the checks accept and breaks one thing; a problem
naming that thing must be reported.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.deploy import support


def _build_dist() -> ModuleType:
    name = "build_dist"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, support.REPO / "scripts" / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CHECKS = _build_dist()
SCRIPTS = "[console_scripts]\nansible-operator = ansible_operator.cli:main\n"


def _wheel_files() -> dict[str, str]:
    files = {f"{CHECKS.COLLECTION}{name}": "" for name in CHECKS.COLLECTION_FILES}
    files["ansible_operator/__init__.py"] = ""
    files["ansible_operator/py.typed"] = ""
    files["ansible_operator-0.1.0.dist-info/entry_points.txt"] = SCRIPTS
    return files


def _sdist_files() -> dict[str, str]:
    files = {f"collections/{CHECKS.COLLECTION}{name}": "" for name in CHECKS.COLLECTION_FILES}
    files |= {"pyproject.toml": "", "README.md": "", "operator/ansible_operator/cli.py": ""}
    return files


def _write_wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def _write_sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(f"ansible_operator-0.1.0/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return path


def _drop(prefix: str) -> Callable[[dict[str, str]], None]:
    def change(files: dict[str, str]) -> None:
        for name in [n for n in files if n.startswith(prefix)]:
            del files[name]

    return change


def _add(name: str, text: str = "") -> Callable[[dict[str, str]], None]:
    def change(files: dict[str, str]) -> None:
        files[name] = text

    return change


def test_the_smallest_good_archives_pass(tmp_path: Path) -> None:
    assert CHECKS.wheel_problems(_write_wheel(tmp_path / "a.whl", _wheel_files())) == []
    assert CHECKS.sdist_problems(_write_sdist(tmp_path / "a.tar.gz", _sdist_files())) == []


WHEEL_CASES = {
    "testbed in the wheel": (_add("testbed/__init__.py"), "top-level entries"),
    "tests in the wheel": (_add("tests/conftest.py"), "top-level entries"),
    "no collection": (_drop("ansible_collections/"), "k8s_status.py is missing"),
    "a module missing": (
        _drop(f"{CHECKS.COLLECTION}plugins/modules/requeue_after"),
        "requeue_after.py is missing",
    ),
    "another collection": (
        _add("ansible_collections/kubernetes/core/MANIFEST.json"),
        "collections [",
    ),
    "a second command": (
        _add(
            "ansible_operator-0.1.0.dist-info/entry_points.txt",
            SCRIPTS + "testbed = testbed.cli:main\n",
        ),
        "console scripts",
    ),
    "no py.typed": (_drop("ansible_operator/py.typed"), "py.typed is missing"),
    "bytecode": (_add("ansible_operator/__pycache__/cli.cpython-311.pyc"), "compiled bytecode"),
}


@pytest.mark.parametrize("case", WHEEL_CASES.values(), ids=WHEEL_CASES.keys())
def test_a_wrong_wheel_is_refused(
    tmp_path: Path, case: tuple[Callable[[dict[str, str]], None], str]
) -> None:
    change, expected = case
    files = _wheel_files()
    change(files)
    problems = CHECKS.wheel_problems(_write_wheel(tmp_path / "a.whl", files))
    assert any(expected in problem for problem in problems), problems


SDIST_CASES = {
    "no collection": (_drop("collections/"), "galaxy.yml is missing"),
    "no pyproject": (_drop("pyproject.toml"), "pyproject.toml is missing"),
    "the tests": (_add("tests/conftest.py"), "holds tests"),
    "the testbed": (_add("testbed/cli.py"), "holds testbed"),
}


@pytest.mark.parametrize("case", SDIST_CASES.values(), ids=SDIST_CASES.keys())
def test_a_wrong_sdist_is_refused(
    tmp_path: Path, case: tuple[Callable[[dict[str, str]], None], str]
) -> None:
    change, expected = case
    files = _sdist_files()
    change(files)
    problems = CHECKS.sdist_problems(_write_sdist(tmp_path / "a.tar.gz", files))
    assert any(expected in problem for problem in problems), problems
