"""The `ansible-operator` command line.

Entry point of the console script and of `python -m ansible_operator`.
Sub-commands: `version` prints our version and those of the libraries that
shape behaviour; `validate` loads watches.yaml and reports; `run` starts the
operator (controller layer).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from ansible_operator import __version__


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    parts = {
        "ansible-operator": __version__,
        "ansible-core": _dist_version("ansible-core"),
        "ansible-runner": _dist_version("ansible-runner"),
        "kopf": _dist_version("kopf"),
        "kubernetes": _dist_version("kubernetes"),
        "python": sys.version.split()[0],
    }
    return ", ".join(f'{key}: "{value}"' for key, value in parts.items())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ansible-operator",
        description="Run Ansible roles and playbooks for Kubernetes custom resources.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the versions of the operator and its engines")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(version_text())
        return 0
    return 2
