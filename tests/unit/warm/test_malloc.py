"""The glibc arena cap: who gets it, and when the environment's own value wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.config import defaults
from ansible_operator.warm import malloc
from ansible_operator.warm.supervisor import WarmServers


@pytest.mark.parametrize(
    ("environ", "arenas", "expected"),
    [
        ({"PATH": "/bin"}, 2, "2"),  # the cap is added
        ({"MALLOC_ARENA_MAX": "8"}, 2, "8"),  # the operator's environment wins
        ({"PATH": "/bin"}, 0, None),  # 0: glibc's default
    ],
)
def test_server_environment(environ: dict[str, str], arenas: int, expected: str | None) -> None:
    env = malloc.server_environment(environ, arenas=arenas)
    assert env.get(malloc.ENV) == expected
    assert {k: v for k, v in env.items() if k != malloc.ENV} == {
        k: v for k, v in environ.items() if k != malloc.ENV
    }


@pytest.mark.parametrize(
    ("preset", "arenas", "applied"),
    [(None, 2, True), ("4", 2, False), (None, 0, False)],
)
def test_limit_this_process(
    monkeypatch: pytest.MonkeyPatch, preset: str | None, arenas: int, applied: bool
) -> None:
    if preset is None:
        monkeypatch.delenv(malloc.ENV, raising=False)
    else:
        monkeypatch.setenv(malloc.ENV, preset)
    assert malloc.limit_this_process(arenas=arenas) is applied


def test_the_warm_servers_start_with_the_cap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(malloc.ENV, raising=False)
    servers = WarmServers(directory=tmp_path / ".warm")
    servers.start()
    try:
        pids = servers.pids()
        assert sorted(pids) == ["module", "playbook"]
        for pid in pids.values():
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"{malloc.ENV}={defaults.MALLOC_ARENAS}".encode() in environ
    finally:
        servers.stop()
