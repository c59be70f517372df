"""The flags of the `plan` sub-command.

:mod:`ansible_operator.cli` adds this parser to every command line it parses;
:mod:`ansible_operator.plan.command`, which runs a plan (the engine, the
runner, the proxy), is imported only when `plan` runs.
"""

from __future__ import annotations

from typing import Any

from ansible_operator.config import defaults
from ansible_operator.config.options import add_compat_argument

__all__ = ["add_plan_parser"]


def add_plan_parser(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        help="show what a CR's role or playbook would change, without changing anything",
        description="Run the watch's role or playbook for one custom resource in check "
        "and diff mode; every write goes to the API server as a dry run. Exit code: "
        "0 no change, 2 changes, 1 error.",
    )
    plan.add_argument("kind", nargs="?", help="kind of an existing CR (or KIND.GROUP)")
    plan.add_argument("name", nargs="?", help="name of an existing CR")
    plan.add_argument("-f", "--filename", help="a CR file (the CR may not exist yet)")
    plan.add_argument("-n", "--namespace", help="namespace of the CR (default: default)")
    plan.add_argument("--watches-file", default=defaults.WATCHES_FILE)
    plan.add_argument("--delete", action="store_true", help="plan the finalizer instead")
    plan.add_argument("-o", "--output", choices=("text", "json"), default="text")
    plan.add_argument("--ansible-args", default=defaults.ANSIBLE_ARGS)
    plan.add_argument(
        "--warm-ansible",
        choices=("true", "false"),
        default=str(defaults.WARM_ANSIBLE).lower(),
        help="fork Ansible from warm interpreters, as the operator does (default true)",
    )
    add_compat_argument(plan)
