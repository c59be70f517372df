"""The `init` and `create api` sub-commands: their flags, and running them.

:mod:`ansible_operator.cli` calls :func:`add_init_parser` and
:func:`add_create_parser` while it builds its parser, and :func:`run_init` /
:func:`run_create_api` to dispatch. Both commands work in the current
directory, print one line per file they wrote and then what to do next; a
bad flag or project prints one line naming it (exit 1) and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ansible_operator.config import defaults
from ansible_operator.errors import ConfigError
from ansible_operator.scaffold.api import ApiRequest, create_api
from ansible_operator.scaffold.project import init
from ansible_operator.scaffold.writer import Plan

_PROG = "ansible-operator"


def _add_api_flags(parser: argparse.ArgumentParser, *, for_init: bool) -> None:
    chained = " (with --version and --kind: also create that API)" if for_init else ""
    parser.add_argument("--group", default=None, help=f"resource group{chained}")
    parser.add_argument("--version", default=None, help="resource version, e.g. v1alpha1")
    parser.add_argument("--kind", default=None, help="resource kind in CamelCase, e.g. Memcached")
    parser.add_argument(
        "--generate-role", action="store_true", help="generate an Ansible role skeleton"
    )
    parser.add_argument(
        "--generate-playbook",
        action="store_true",
        help="generate an Ansible playbook (that runs the role, with --generate-role)",
    )
    parser.add_argument(
        "--crd-version",
        default=defaults.SCAFFOLD_CRD_VERSION,
        help=f"CustomResourceDefinition version (default {defaults.SCAFFOLD_CRD_VERSION})",
    )


def add_init_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("init", help="write a new operator project in the current directory")
    parser.add_argument("--domain", default="my.domain", help="domain of the API groups")
    parser.add_argument(
        "--project-name", default=None, help="project name (default: the directory's name)"
    )
    _add_api_flags(parser, for_init=True)


def add_create_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    create = sub.add_parser("create", help="add to the project in the current directory")
    what = create.add_subparsers(dest="create_what", required=True, metavar="api")
    api = what.add_parser("api", help="add a kind: its watch, CRD, RBAC, sample, role/playbook")
    _add_api_flags(api, for_init=False)


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
