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

from testbed import image_build, images
from testbed.control_plane import ControlPlane, TestbedError
from testbed.layout import DEFAULT_NODES, PACKAGE_DIR, Layout, read_versions
from testbed.probes import NotReady


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testbed", description="A local Kubernetes control plane."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build or reuse the pinned binaries")
    images = sub.add_parser("images", help="build or reuse the real node's images")
    images.add_argument("keys", nargs="*", help="images to build (NAME-TAG); all by default")
    up = sub.add_parser("up", help="start (or reuse) the testbed and print how to reach it")
    up.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="number of fake nodes")
    sub.add_parser("down", help="stop what `up` started and remove its state")
    sub.add_parser("status", help="print what runs, as JSON")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    sub.add_parser(
        "related-images",
        help="with a real node: print `export RELATED_IMAGE_...=...` lines naming its images",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    layout = Layout.default()
    if args.command == "images":
        return build_images(layout, args.keys)
    if args.command == "build":
        return subprocess.run([str(PACKAGE_DIR / "build.sh"), "all"], check=False).returncode
    plane = ControlPlane(layout, nodes=getattr(args, "nodes", DEFAULT_NODES))
    if args.command == "up":
        return _up(plane)
    if args.command == "down":
        stopped = plane.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    if args.command == "related-images":
        _related_images(plane)
    elif args.command == "status":
        print(json.dumps(plane.status(), indent=2))
        return 0 if plane.healthy() else 1
    else:
        print(layout.kubeconfig)
    return 0


def _related_images(plane: ControlPlane) -> None:
    """`export RELATED_IMAGE_...` lines for `make run`, when the testbed has a real node."""
    if "node_ip" in (plane.status().get("real_node") or {}):
        for env, ref in images.related_images().items():
            print(f"export {env}={ref}")


def _up(plane: ControlPlane) -> int:
    try:
        report = plane.up()
    except (TestbedError, NotReady) as err:
        print(f"testbed up failed: {err}", file=sys.stderr)
        return 1
    print(report.summary())
    return 0


def build_images(layout: Layout, keys: list[str]) -> int:
    """Build (or find cached) each image; one line per image with its digest and size."""
    specs = images.specs()
    unknown = [k for k in keys if k not in specs]
    if unknown:
        print(f"unknown images: {', '.join(unknown)} (known: {', '.join(specs)})", file=sys.stderr)
        return 2
    versions = read_versions()
    for key in keys or list(specs):
        try:
            built = image_build.build(layout.cache_dir, specs[key], versions)
        except images.ImageBuildError as err:
            print(f"testbed images: {err}", file=sys.stderr)
            return 1
        print(
            f"{built.spec.ref} {built.digest} {built.size / 1e6:.0f} MB "
            f"(built in {built.seconds:.0f} s)"
        )
    return 0
