"""`ansible-operator plan`: run a CR's role in check mode against a read-only proxy.

Where it sits: cli.py adds the parser (plan/planflags.py) and, only when `plan`
runs, imports this module and calls `run_plan(args)`. The flow, reusing the operator's own layers:

1. config.watches loads watches.yaml; plan.target resolves the CR (a file,
   dry-run against the API server, or KIND NAME read live);
2. an ApiProxy (proxy) on loopback with a Journal as its `on_dry_run` hook,
   and a RunAccess (launch.access) that issues the run a read-only
   token and writes its kubeconfig: the run can reach the cluster only
   through the proxy, which sends every write as a dry run;
3. controller.reconciler.build_run_request builds the reconcile's own
   RunRequest; `--check --diff` are added to its Ansible arguments and the
   Journal observes its events; runner.ansible.AnsibleRunner runs it in a
   private runner directory, removed afterwards;
4. plan.changes reads the journal, plan.report prints the plan and gives the
   exit code (0 no change, 2 changes, 1 error).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from ansible_operator.compat import mode as compat_mode
from ansible_operator.config import defaults
from ansible_operator.config.options import ansible_compat
from ansible_operator.config.watches import Watch, load_watches
from ansible_operator.errors import OperatorError
from ansible_operator.kube.client import Kube, load_login
from ansible_operator.plan import report, target
from ansible_operator.plan.engine import make_plan

__all__ = ["run_plan"]


def _usage_error(args: argparse.Namespace) -> str:
    if args.filename and (args.kind or args.name):
        return "give either -f FILE or KIND NAME, not both"
    if not args.filename and not (args.kind and args.name):
        return "give -f FILE, or KIND NAME of an existing CR"
    return ""


def run_plan(args: argparse.Namespace) -> int:
    """The `plan` sub-command; returns the exit code."""
    problem = _usage_error(args)
    try:
        if problem:
            raise target.PlanInputError(problem)
        watches = load_watches(
            args.watches_file,
            max_concurrent_reconciles_default=defaults.MAX_CONCURRENT_RECONCILES,
            ansible_verbosity_default=defaults.ANSIBLE_VERBOSITY,
        )
        kube = Kube(load_login())
        found = _target(args, watches, kube)
        # As `run` does, before the warm servers start.
        compat = compat_mode.resolve(ansible_compat(args, os.environ))
        compat_mode.apply(compat, os.environ)
        plan = make_plan(
            found,
            kube=kube,
            ansible_args=args.ansible_args,
            deleting=args.delete,
            warm=args.warm_ansible == "true",
            compat_restores=compat.restores,
        )
    except OperatorError as err:
        print(f"ansible-operator plan: {' '.join(str(err).split())}", file=sys.stderr)
        return report.ERROR
    print(report.to_json(plan) if args.output == "json" else report.text(plan), end="")
    if args.output == "json":
        print()
    return report.exit_code(plan)


def _target(args: argparse.Namespace, watches: list[Watch], kube: Kube) -> target.Target:
    if args.filename:
        found = target.from_file(
            Path(args.filename), watches=watches, kube=kube, namespace=args.namespace
        )
    else:
        found = target.from_cluster(
            args.kind, args.name, watches=watches, kube=kube, namespace=args.namespace
        )
    if args.delete:
        found = target.deleting(found, now=datetime.datetime.now(datetime.UTC))
    return found
