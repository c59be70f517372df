"""Helpers for the scaffolding tests: run the CLI in-process, snapshot a directory tree."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ansible_operator import cli
from testbed.layout import Layout


@dataclass
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`run_cli(directory, "init", "--domain", ...)`: the real command line, in `directory`."""

    def run(directory: Path, *args: str) -> Result:
        monkeypatch.chdir(directory)
        capsys.readouterr()
        code = cli.main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file and directory under `root`, with the files' contents."""
    return {
        str(path.relative_to(root)) + ("/" if path.is_dir() else ""): (
            b"" if path.is_dir() else path.read_bytes()
        )
        for path in sorted(root.rglob("*"))
    }


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def kubectl_binary() -> str:
    """The testbed's kubectl (it has `kustomize`), else the one on PATH."""
    built = Layout.default().binary("kubectl")
    if built.exists():
        return str(built)
    found = shutil.which("kubectl")
    assert found, "kubectl not found: build the testbed (make testbed-build) or put kubectl on PATH"
    return found


DOMAIN = "example.com"
INIT = ("init", "--domain", DOMAIN, "--project-name", "memcached-operator")
MEMCACHED = ("create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached")
BACKUP = ("create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Backup")


@pytest.fixture
def project(tmp_path: Path, run_cli: Cli) -> Path:
    """An initialized project without APIs."""
    root = tmp_path / "memcached-operator"
    root.mkdir()
    result = run_cli(root, *INIT)
    assert result.code == 0, result.err
    return root
