"""`inputdir.sweep_scratch_dirs`: a killed operator's run scratch directories go at start-up."""

from __future__ import annotations

from pathlib import Path

from ansible_operator.runner.inputdir import DISCOVERY_DIR, sweep_scratch_dirs


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
