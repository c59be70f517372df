"""bench.procs.consistent_pss: a PSS sum counts only when the tree did not change while
its processes were read (a sharer exiting mid-sweep double-counts its shared pages)."""

from __future__ import annotations

import os

import pytest

from bench import procs


@pytest.mark.parametrize(
    ("trees_after", "attempts", "consistent", "sweeps", "unchecked"),
    [
        ([[1, 2]], 3, True, 1, 200),  # nothing changed: the first sum counts
        ([[1], [1]], 3, True, 2, 200),  # 2 exited mid-sweep: swept again, then unchanged
        ([[1, 2, 3], [1, 2], [1]], 3, False, 3, 300),  # changing every time: none counts
    ],
)
def test_consistent_pss(
    monkeypatch: pytest.MonkeyPatch,
    trees_after: list[list[int]],
    attempts: int,
    consistent: bool,
    sweeps: int,
    unchecked: int,
) -> None:
    swept: list[list[int]] = []
    answers = iter(trees_after)

    def pss_bytes(pids: list[int]) -> int:
        swept.append(pids)
        return 100 * len(pids)

    monkeypatch.setattr(procs, "pss_bytes", pss_bytes)
    monkeypatch.setattr(procs, "tree", lambda root: next(answers))
    sample = procs.consistent_pss(1, [1, 2], attempts=attempts)
    assert (sample.consistent, len(swept)) == (consistent, sweeps)
    assert sample.unchecked == unchecked  # the largest sum of any sweep
    assert sample.total == (100 * len(swept[-1]) if consistent else 0)


def test_a_quiet_tree_gives_its_pss() -> None:
    me = os.getpid()
    sample = procs.consistent_pss(me, procs.tree(me))
    assert sample.consistent
    assert sample.total > 0
