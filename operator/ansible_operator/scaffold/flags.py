"""The flags of the `init` and `create api` sub-commands.

:mod:`ansible_operator.cli` adds these parsers to every command line it parses;
:mod:`ansible_operator.scaffold.commands`, which runs them and needs the
templates and writers, is imported only when one of them runs, so `run` does
not load the scaffold.
"""

from __future__ import annotations

import argparse

from ansible_operator.config import defaults

__all__ = ["add_create_parser", "add_init_parser"]


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
