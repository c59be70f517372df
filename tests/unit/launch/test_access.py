"""Kubeconfig directories left by killed operators are removed, and only those."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ansible_operator.launch.access import DIR_PREFIX, sweep_stale


@dataclass(frozen=True)
class Pids:
    dead: int
    alive: int


@pytest.fixture(scope="module")
def pids() -> Iterator[Pids]:
    ended = subprocess.Popen(["true"])
    ended.wait()
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        yield Pids(dead=ended.pid, alive=sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()


# (case, name with {dead}/{alive}/{own} placeholders, make a directory?, removed?)
CASES = [
    ("a dead operator's directory", DIR_PREFIX + "{dead}-abc123", True, True),
    ("an earlier incarnation with our own pid", DIR_PREFIX + "{own}-abc123", True, True),
    ("a live process's directory", DIR_PREFIX + "{alive}-abc123", True, False),
    ("the old naming without a pid", DIR_PREFIX + "abc123", True, False),
    ("a pid that is not a number", DIR_PREFIX + "12x4-abc123", True, False),
    ("a file, not a directory", DIR_PREFIX + "{dead}-abc123", False, False),
    ("someone else's prefix", "ansible-operator-other-{dead}-abc123", True, False),
]


@pytest.mark.parametrize(
    ("name", "is_dir", "removed"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_sweep_removes_only_what_dead_operators_left(
    tmp_path: Path, pids: Pids, name: str, is_dir: bool, removed: bool
) -> None:
    entry = tmp_path / name.format(dead=pids.dead, alive=pids.alive, own=os.getpid())
    if is_dir:
        entry.mkdir()
        (entry / "run-x.kubeconfig").write_text("token: gone with its process\n")
    else:
        entry.write_text("not ours to remove\n")

    assert sweep_stale(tmp_path) == int(removed)
    assert entry.exists() is not removed


def test_a_symlink_is_never_followed(tmp_path: Path, pids: Pids) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("x")
    (tmp_path / f"{DIR_PREFIX}{pids.dead}-abc123").symlink_to(target)

    assert sweep_stale(tmp_path) == 0
    assert (target / "keep").exists()


def test_a_missing_temp_dir_is_not_an_error(tmp_path: Path) -> None:
    assert sweep_stale(tmp_path / "absent") == 0
