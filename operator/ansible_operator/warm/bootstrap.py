"""Start-up steps shared by the two warm servers: arguments, pre-imports, the rules.

Where this sits: `python -m ansible_operator.warm.pbserver|modserver --socket PATH`
(started by supervisor.py) calls `start()` first, then forkserver.serve().
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.errors import WarmStartError

__all__ = ["Started", "start"]


@dataclass(frozen=True)
class Started:
    socket_path: Path
    base_path: list[str]
    """sys.path of a fresh interpreter of ours, without the server's own entry."""
    skipped: tuple[str, ...]
    seconds: float


def _preimport(names: Iterable[str]) -> tuple[str, ...]:
    skipped = []
    for name in names:
        try:
            __import__(name)
        except Exception:  # an optional module or a collection that is not installed
            skipped.append(name)
    return tuple(skipped)


def start(argv: Sequence[str], *, preimports: Sequence[str], forbidden: Sequence[str]) -> Started:
    """Parse `--socket`, import `preimports`, and refuse (WarmStartError) when any
    module of `forbidden` got imported."""
    parser = argparse.ArgumentParser(description="warm Ansible fork server")
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket to listen on")
    args = parser.parse_args(argv)
    # `python -m` put the cwd first on sys.path: a run child must not see it.
    own_entry = sys.path[0] if sys.path else ""
    started = time.monotonic()
    skipped = _preimport(preimports)
    loaded = [name for name in forbidden if name in sys.modules]
    if loaded:
        raise WarmStartError(
            f"refusing to serve: pre-imports loaded {', '.join(loaded)}, which would freeze "
            "per-run configuration into every run"
        )
    # Imports may extend sys.path (ansible._vendor does): keep those additions.
    base_path = [p for p in sys.path if p != own_entry]
    return Started(
        socket_path=args.socket,
        base_path=base_path,
        skipped=skipped,
        seconds=time.monotonic() - started,
    )
