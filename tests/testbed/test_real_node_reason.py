"""A machine that cannot run the real node is told why in one line, and the
testbed runs fake nodes only (no cluster needed: `node.unavailable` decides
before anything starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed import node
from testbed.control_plane import _describe
from testbed.layout import Layout


def _layout(tmp_path: Path) -> Layout:
    return Layout(state_dir=tmp_path / "tb", cache_dir=tmp_path / "cache")


def test_turned_off_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTBED_REAL_NODE", "0")
    assert node.unavailable(_layout(tmp_path)) == "turned off by TESTBED_REAL_NODE"


def test_without_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTBED_REAL_NODE", raising=False)
    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    assert node.unavailable(_layout(tmp_path)) == "needs root (network namespace, mounts, cgroups)"


def test_without_containerd_or_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTBED_REAL_NODE", raising=False)
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node.shutil, "which", lambda name: None if name == "containerd" else "/x")
    reason = node.unavailable(_layout(tmp_path))
    assert reason is not None
    assert reason.startswith("missing containerd")
    assert "\n" not in reason
    monkeypatch.setattr(node.shutil, "which", lambda name: "/x")
    monkeypatch.setattr(node, "CNI_PLUGINS", tmp_path)
    (tmp_path / "bridge").touch()
    reason = node.unavailable(_layout(tmp_path))  # an empty cache: nothing built
    assert reason is not None
    assert reason.startswith("not built: kubelet, kube-proxy, coredns, postgresql-15")


def test_the_up_summary_gives_the_reason() -> None:
    line = _describe({"off": "needs root (network namespace, mounts, cgroups)"})
    assert line == "off: needs root (network namespace, mounts, cgroups) (fake nodes only)"
