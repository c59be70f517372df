"""The `init` and `create api` sub-commands: running them.

:mod:`ansible_operator.cli` adds their flags from :mod:`ansible_operator.scaffold.flags`
while it builds its parser, and imports this module to call :func:`run_init` /
:func:`run_create_api` when one of them runs. Both commands work in the current
directory, print one line per file they wrote and then what to do next; a
bad flag or project prints one line naming it (exit 1) and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ansible_operator.errors import ConfigError
from ansible_operator.scaffold.api import ApiRequest, create_api
from ansible_operator.scaffold.project import init
from ansible_operator.scaffold.writer import Plan

_PROG = "ansible-operator"


def _request(args: argparse.Namespace) -> ApiRequest:
    return ApiRequest(
        group=args.group or "",
        version=args.version or "",
        kind=args.kind or "",
        generate_role=args.generate_role,
        generate_playbook=args.generate_playbook,
        crd_version=args.crd_version,
    )


def _init_request(args: argparse.Namespace) -> ApiRequest | None:
    given = {flag: getattr(args, flag) for flag in ("group", "version", "kind")}
    if not any(given.values()):
        if args.generate_role or args.generate_playbook:
            raise ConfigError(
                "--generate-role/--generate-playbook: need --group, --version and --kind"
            )
        return None
    for flag, value in given.items():
        if not value:
            raise ConfigError(f"--{flag}: needed with {', '.join('--' + f for f in given)}")
    return _request(args)


def _report(lines: list[str], next_steps: str) -> None:
    for line in lines:
        print(line)
    print(next_steps)


def run_init(args: argparse.Namespace) -> int:
    try:
        api = _init_request(args)
        written = init(
            Plan(Path.cwd()), domain=args.domain, project_name=args.project_name, api=api
        )
    except ConfigError as err:
        print(f"{_PROG} init: {err}", file=sys.stderr)
        return 1
    if api is None:
        _report(written, f"Next: define a resource with:\n$ {_PROG} create api")
    else:
        _report(written, "Next: make install run (against the cluster of $KUBECONFIG)")
    return 0


def run_create_api(args: argparse.Namespace) -> int:
    try:
        written = create_api(Plan(Path.cwd()), _request(args))
    except ConfigError as err:
        print(f"{_PROG} create api: {err}", file=sys.stderr)
        return 1
    _report(
        written,
        "Next: make install run; then kubectl apply -k config/samples "
        "(and add to config/rbac/role.yaml the kinds your role writes)",
    )
    return 0
