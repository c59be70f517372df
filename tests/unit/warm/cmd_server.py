"""A fork server for the unit tests: its run child execs the requested command.

`python -m tests.unit.warm.cmd_server --socket PATH` serves like the real servers
(forkserver.serve, child.become_fresh) but without pre-imports. The argv `__comm__`
prints the run child's own process name and exits through `exit_like_python`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from ansible_operator.warm import child, forkserver
from ansible_operator.warm.protocol import Request


def run_child(fds: list[int], request: Request) -> NoReturn:
    child.become_fresh(fds, request, base_path=list(sys.path), main_dir=None)
    if request.argv == ["__comm__"]:
        print(Path("/proc/self/comm").read_text().strip())
        child.exit_like_python(5)
    os.execvp(request.argv[0], request.argv)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True, type=Path)
    args = parser.parse_args()
    forkserver.serve(socket_path=args.socket, child_main=run_child, name="test")


if __name__ == "__main__":
    main()
