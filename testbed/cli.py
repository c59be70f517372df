"""The `testbed` command: build, up, down, status, kubeconfig.

Called by the Makefile targets `testbed-build`, `testbed-up`, `testbed-down`
and `testbed-status`. Exit codes: 0 success, 1 the testbed failed (the message
says which component and where its log is), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from testbed.control_plane import ControlPlane, TestbedError
from testbed.layout import DEFAULT_NODES, PACKAGE_DIR, Layout
from testbed.probes import NotReady


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testbed", description="A local Kubernetes control plane."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build or reuse the pinned binaries")
    up = sub.add_parser("up", help="start (or reuse) the testbed and print how to reach it")
    up.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="number of fake nodes")
    sub.add_parser("down", help="stop what `up` started and remove its state")
    sub.add_parser("status", help="print what runs, as JSON")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    layout = Layout.default()
    if args.command == "build":
        return subprocess.run([str(PACKAGE_DIR / "build.sh"), "all"], check=False).returncode
    plane = ControlPlane(layout, nodes=getattr(args, "nodes", DEFAULT_NODES))
    if args.command == "up":
        try:
            report = plane.up()
        except (TestbedError, NotReady) as err:
            print(f"testbed up failed: {err}", file=sys.stderr)
            return 1
        print(report.summary())
        return 0
    if args.command == "down":
        stopped = plane.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    if args.command == "status":
        print(json.dumps(plane.status(), indent=2))
        return 0 if plane.healthy() else 1
    print(layout.kubeconfig)
    return 0
