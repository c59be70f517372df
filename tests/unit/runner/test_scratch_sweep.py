"""`inputdir.sweep_scratch_dirs`: a killed operator's run scratch directories go at start-up."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from ansible_operator.runner import inputdir
from ansible_operator.runner.inputdir import DISCOVERY_DIR, scratch_dir, sweep_scratch_dirs


def make_cr_dir(root: Path, *segments: str) -> Path:
    cr = root.joinpath(*segments)
    (cr / "env").mkdir(parents=True)
    (cr / "artifacts" / "123").mkdir(parents=True)
    return cr


def test_only_scratch_dirs_of_cr_dirs_are_removed(tmp_path: Path) -> None:
    namespaced = make_cr_dir(tmp_path, "g.example.com", "v1", "Kind", "ns", "a")
    cluster = make_cr_dir(tmp_path, "g.example.com", "v1", "Cluster", "b")
    for cr in (namespaced, cluster):
        (cr / "tmp-42" / "ansible_k8s_payload_x").mkdir(parents=True)
    kept = [
        namespaced / "artifacts" / "123" / "tmp-7",  # inside artifacts: a run's own output
        tmp_path / DISCOVERY_DIR / "tmp-8",
        tmp_path / "g.example.com" / "tmp-9",  # not beside an env/: not a CR dir
        namespaced / "tmp-notanident",
    ]
    for path in kept:
        path.mkdir(parents=True)
    assert sweep_scratch_dirs(tmp_path) == 2
    assert not (namespaced / "tmp-42").exists()
    assert not (cluster / "tmp-42").exists()
    assert all(path.is_dir() for path in kept)
    assert (namespaced / "env").is_dir()


def test_a_missing_root_is_nothing_to_do(tmp_path: Path) -> None:
    assert sweep_scratch_dirs(tmp_path / "absent") == 0


def test_a_runs_tmpdir_is_a_short_link_that_the_sweep_removes_after_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-core 2.21 puts a Unix socket under $TMPDIR: the name must stay short,
    even when the operator's own temp dir is long (then the link goes to /tmp)."""
    long_tmp = tmp_path / ("t" * 40)
    long_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_tmp))
    root = tmp_path / ("r" * 60)
    cr = make_cr_dir(root, "g.example.com", "v1alpha1", "LongKindName", "namespace", "name")
    other = make_cr_dir(tmp_path / "other-root", "g", "v1", "K", "ns", "n")
    alias = scratch_dir(cr, "1234567890123456789", root=root)
    elsewhere = scratch_dir(other, "42", root=tmp_path / "other-root")
    try:
        # `elsewhere` is a live run of another operator: its target exists.

        assert len(str(alias)) + len("/pymp-12345678/listener-12345678") < 108, alias
        assert alias.resolve() == cr / "tmp-1234567890123456789"
        # The operator was killed mid-run (the kernel drops its lock), and restarts.
        inputdir._release(cr / "tmp-1234567890123456789")
        sweep_scratch_dirs(root)
        assert not (cr / "tmp-1234567890123456789").exists()
        assert not alias.parent.exists()
        assert elsewhere.resolve() == other / "tmp-42"
    finally:
        shutil.rmtree(alias.parent, ignore_errors=True)
        shutil.rmtree(elsewhere.parent, ignore_errors=True)


def test_a_live_runs_scratch_dir_is_left_and_its_lock_goes_with_the_run(tmp_path: Path) -> None:
    """Two operators may share a runner root; a sweep never removes a running run's TMPDIR."""
    cr = make_cr_dir(tmp_path, "g", "v1", "K", "ns", "live")
    alias = scratch_dir(cr, "77", root=tmp_path)
    try:
        assert sweep_scratch_dirs(tmp_path) == 0
        assert (cr / "tmp-77").is_dir()
    finally:
        inputdir.finish_run(
            cr, ident="77", max_artifacts=1, root=tmp_path, completed=True, alias=alias
        )
    (cr / "tmp-77").mkdir()  # what a killed run leaves: nobody holds it
    assert sweep_scratch_dirs(tmp_path) == 1
